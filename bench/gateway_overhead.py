"""Gateway overhead: a fake upstream called directly, through nginx, and through the gateway.

    python -m bench.gateway_overhead [--concurrency 1,64,256] [--requests 300,2048,2048]
        [--rounds 4] [--gateway-workers 1,2] [--no-nginx] [--write-results bench/RESULTS.md]

Starts ``engine.fake`` (fixed tokens at a fixed pace), nginx as a plain
streaming reverse proxy in front of it (Debian's nginx, one worker process,
``proxy_buffering off``, keep-alive upstream; skipped when no ``nginx`` is on
PATH), and the real gateway (``specroute gateway serve``) once per entry of
``--gateway-workers``, each as its own process tree, with a snapshot file whose
only pool points at the upstream. At each concurrency it runs closed-loop
streaming chat requests direct and through every proxy, and reports TTFT and
per-token latency (p50/p99), requests/s and each proxy's CPU seconds per request
(psutil over its whole process tree: nginx's master and worker, the gateway's
supervisor and workers). Loopback only.

Added TTFT is p(proxy) - p(direct) of the same percentile: all runs see the
same upstream schedule, so the difference is what the proxy adds. At
concurrency 1 the modes are interleaved request by request (direct, nginx,
gateway, gateway, nginx, direct, ...) in one loop, so a drift of the machine's
state during the run (CPU placement, frequency, neighbours) shifts all alike; at
higher concurrency they run one after the other, since running them together
would make them compete for the same upstream.
"""

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import numpy as np
import psutil
import uvloop

from specwire import PolicySnapshot, PoolSnapshot, TenantSpec, WorkerSpec

T = TypeVar("T")
MODEL = "bench-model"
API_KEY = "bench-key"
SECTION = "## Gateway overhead"


@dataclass(frozen=True)
class Sample:
    ok: bool
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    error: str = ""  # HTTP status or exception name when not ok


def failed(error: str) -> Sample:
    return Sample(False, 0.0, 0.0, 0.0, error)


@dataclass(frozen=True)
class RunResult:
    mode: str
    concurrency: int
    samples: list[Sample]
    wall_s: float
    cpu_s: float | None  # CPU seconds of the gateway process during the run
    upstream_cpu_s: float  # CPU seconds of the fake upstream: the yardstick on a shared machine
    loadgen_cpu_s: float

    @property
    def ok(self) -> list[Sample]:
        return [s for s in self.samples if s.ok]

    @property
    def errors(self) -> int:
        return len(self.samples) - len(self.ok)

    @property
    def error_summary(self) -> str:
        if not self.errors:
            return "0"
        kinds = Counter(s.error for s in self.samples if not s.ok)
        return f"{self.errors} (" + ", ".join(f"{k}: {n}" for k, n in kinds.most_common()) + ")"

    @property
    def rps(self) -> float:
        return len(self.ok) / self.wall_s

    def pct(self, field: str, q: float) -> float:
        return float(np.percentile([getattr(s, field) for s in self.ok], q))

    @property
    def cpu_per_request_ms(self) -> float | None:
        return None if self.cpu_s is None else 1000.0 * self.cpu_s / max(len(self.ok), 1)

    @property
    def upstream_cpu_per_request_ms(self) -> float:
        return 1000.0 * self.upstream_cpu_s / max(len(self.ok), 1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"{url} not ready after {timeout_s} s")


def write_snapshot(path: Path, upstream_url: str) -> None:
    snapshot = PolicySnapshot(
        version=1,
        generated_at=datetime.now(UTC),
        ttl_seconds=86_400.0,  # a static file: never stale during the run
        pools=[
            PoolSnapshot(
                id=1,
                name="bench-baseline",
                served_model_name=MODEL,
                target_ref="fake",
                workers=[
                    WorkerSpec(id="fake-1", pool_id=1, endpoint_url=upstream_url, healthy=True)
                ],
            )
        ],
        tenants=[
            TenantSpec(
                id=1, name="bench", key_hashes=[hashlib.sha256(API_KEY.encode()).hexdigest()]
            )
        ],
    )
    path.write_text(snapshot.model_dump_json())


def request_body(endpoint: str) -> bytes:
    body: dict[str, object] = {"model": MODEL, "stream": True, "max_tokens": 64}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": "benchmark"}]
    else:
        body["prompt"] = "benchmark"
    return json.dumps(body).encode()


async def one_request(session: aiohttp.ClientSession, url: str, body: bytes) -> Sample:
    t0 = time.perf_counter()
    first = last = 0.0
    tokens = 0
    try:
        async with session.post(url, data=body) as resp:
            if resp.status != 200:
                await resp.read()
                return failed(str(resp.status))
            async for line in resp.content:
                # A token chunk is a data line carrying the fake's " tok" text.
                if line.startswith(b"data: ") and b"tok" in line:
                    last = time.perf_counter()
                    if tokens == 0:
                        first = last
                    tokens += 1
        end = time.perf_counter()
    except (aiohttp.ClientError, TimeoutError) as exc:
        return failed(type(exc).__name__)
    if tokens < 2:
        return failed(f"{tokens} tokens")
    return Sample(
        True,
        ttft_ms=1000.0 * (first - t0),
        tpot_ms=1000.0 * (last - first) / (tokens - 1),
        e2e_ms=1000.0 * (end - t0),
    )


def load_session() -> aiohttp.ClientSession:
    """The load generator's client: the bench key, no connection cap, keep-alive."""
    headers = {"authorization": f"Bearer {API_KEY}", "content-type": "application/json"}
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, force_close=False),
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=60.0),
    )


async def closed_loop(url: str, body: bytes, concurrency: int, total: int) -> list[Sample]:
    """`concurrency` workers each send requests back to back until `total` are done."""
    samples: list[Sample] = []
    remaining = total
    async with load_session() as session:

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                samples.append(await one_request(session, url, body))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples


async def interleaved(urls: list[str], body: bytes, total: int) -> list[list[Sample]]:
    """One request at a time over every URL, forward then backward (ABBA order); samples
    per URL."""
    out: list[list[Sample]] = [[] for _ in urls]
    order = list(range(len(urls)))
    async with load_session() as session:
        for i in range(total):
            for which in order if i % 2 == 0 else order[::-1]:
                out[which].append(await one_request(session, urls[which], body))
    return out


def drive(coro: Coroutine[Any, Any, T]) -> T:
    # uvloop keeps the load generator's own per-chunk cost low, so it is not the bottleneck.
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


@dataclass
class Target:
    """One way to the upstream: direct, or through a proxy's process tree."""

    mode: str
    url: str  # base URL
    procs: list[psutil.Process]  # the proxy's processes (empty: direct)

    def cpu_s(self) -> float | None:
        if not self.procs:
            return None
        total = 0.0
        for proc in self.procs:
            with contextlib.suppress(psutil.Error):
                total += sum(proc.cpu_times()[:2])
        return total


def tree(pid: int) -> list[psutil.Process]:
    """A process and its descendants (nginx's workers, uvicorn's worker processes)."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def run(
    target: Target,
    path: str,
    body: bytes,
    concurrency: int,
    total: int,
    upstream: psutil.Process,
) -> RunResult:
    url = target.url + path
    # Warm-up: open the connections and let both servers' caches settle.
    drive(closed_loop(url, body, concurrency, min(concurrency * 2, total)))
    me = psutil.Process()
    cpu0 = target.cpu_s()
    up0 = sum(upstream.cpu_times()[:2])
    me0 = sum(me.cpu_times()[:2])
    t0 = time.perf_counter()
    samples = drive(closed_loop(url, body, concurrency, total))
    wall = time.perf_counter() - t0
    cpu1 = target.cpu_s()
    cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
    up = sum(upstream.cpu_times()[:2]) - up0
    return RunResult(
        target.mode, concurrency, samples, wall, cpu, up, sum(me.cpu_times()[:2]) - me0
    )


def merged(runs: list[RunResult]) -> RunResult:
    """One target's rounds as one run: samples, wall time and CPU added up."""
    cpus = [r.cpu_s for r in runs]
    return RunResult(
        runs[0].mode,
        runs[0].concurrency,
        [s for r in runs for s in r.samples],
        sum(r.wall_s for r in runs),
        None if any(c is None for c in cpus) else sum(c or 0.0 for c in cpus),
        sum(r.upstream_cpu_s for r in runs),
        sum(r.loadgen_cpu_s for r in runs),
    )


def run_rounds(
    targets: list[Target],
    path: str,
    body: bytes,
    concurrency: int,
    total: int,
    rounds: int,
    upstream: psutil.Process,
) -> list[RunResult]:
    """`rounds` runs of `total / rounds` requests per target, in ABBA order over the
    targets, so a change of the shared machine's load during the level shifts all alike."""
    per = max(total // rounds, concurrency)
    done: list[list[RunResult]] = [[] for _ in targets]
    order = list(range(len(targets)))
    for i in range(rounds):
        for which in order if i % 2 == 0 else order[::-1]:
            done[which].append(run(targets[which], path, body, concurrency, per, upstream))
    return [merged(runs) for runs in done]


def run_interleaved(
    targets: list[Target], path: str, body: bytes, total: int, upstream: psutil.Process
) -> list[RunResult]:
    """Concurrency 1, every mode in one loop. Each mode's wall time is the sum of its
    requests' end-to-end times; the upstream's and load generator's CPU are split evenly."""
    urls = [t.url + path for t in targets]
    drive(interleaved(urls, body, 4))  # warm-up
    me = psutil.Process()
    cpu0 = [t.cpu_s() for t in targets]
    up0, me0 = sum(upstream.cpu_times()[:2]), sum(me.cpu_times()[:2])
    per_url = drive(interleaved(urls, body, total))
    up = sum(upstream.cpu_times()[:2]) - up0
    mine = sum(me.cpu_times()[:2]) - me0
    out = []
    for target, samples, c0 in zip(targets, per_url, cpu0, strict=True):
        c1 = target.cpu_s()
        cpu = None if c0 is None or c1 is None else c1 - c0
        wall = sum(x.e2e_ms for x in samples if x.ok) / 1000.0 or 1e-9
        n = len(targets)
        out.append(RunResult(target.mode, 1, samples, wall, cpu, up / n, mine / n))
    return out


def table(levels: list[list[RunResult]]) -> str:
    head = (
        "| conc | mode | n | err | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | req/s "
        "| added TTFT p50 / p99 | added TPOT p50 / p99 | req/s ratio | CPU ms/req "
        "| upstream CPU ms/req |"
    )
    lines = [head, "|" + "---|" * 14]
    for runs in levels:
        direct = runs[0]
        for r in runs:
            row = [
                str(r.concurrency),
                r.mode,
                str(len(r.samples)),
                r.error_summary,
                f"{r.pct('ttft_ms', 50):.2f}",
                f"{r.pct('ttft_ms', 99):.2f}",
                f"{r.pct('tpot_ms', 50):.3f}",
                f"{r.pct('tpot_ms', 99):.3f}",
                f"{r.rps:.1f}",
            ]
            if r is not direct:
                row += [
                    f"{r.pct('ttft_ms', 50) - direct.pct('ttft_ms', 50):+.2f} / "
                    f"{r.pct('ttft_ms', 99) - direct.pct('ttft_ms', 99):+.2f}",
                    f"{r.pct('tpot_ms', 50) - direct.pct('tpot_ms', 50):+.3f} / "
                    f"{r.pct('tpot_ms', 99) - direct.pct('tpot_ms', 99):+.3f}",
                    f"{r.rps / direct.rps:.2f}",
                    f"{r.cpu_per_request_ms:.2f}" if r.cpu_per_request_ms is not None else "",
                ]
            else:
                row += ["", "", "", ""]
            row.append(f"{r.upstream_cpu_per_request_ms:.2f}")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def goals(levels: list[list[RunResult]]) -> list[str]:
    """The goals of issue #23 for every gateway mode: added TTFT p50 at concurrency 1
    <= 0.5 ms, >= 0.97 of the direct rate at 64, CPU per request at 64 <= 2x nginx's."""
    out = []

    def verdict(ok: bool) -> str:
        return "met" if ok else "MISSED"

    for runs in levels:
        direct = runs[0]
        nginx = next((r for r in runs if r.mode == "nginx"), None)
        for gw in (r for r in runs if r.mode.startswith("gateway")):
            if direct.concurrency == 1:
                added = gw.pct("ttft_ms", 50) - direct.pct("ttft_ms", 50)
                out.append(
                    f"- {gw.mode}: added TTFT p50 at concurrency 1: {added:.2f} ms "
                    f"(goal <= 0.5 ms): {verdict(added <= 0.5)}"
                )
            if direct.concurrency == 64:
                ratio = gw.rps / direct.rps
                out.append(
                    f"- {gw.mode}: req/s ratio at concurrency 64: {ratio:.2f} "
                    f"(goal >= 0.97): {verdict(ratio >= 0.97)}"
                )
                gw_cpu = gw.cpu_per_request_ms
                ng_cpu = nginx.cpu_per_request_ms if nginx is not None else None
                if gw_cpu is not None and ng_cpu:
                    out.append(
                        f"- {gw.mode}: CPU per request at concurrency 64: {gw_cpu:.2f} ms, "
                        f"{gw_cpu / ng_cpu:.2f}x nginx's {ng_cpu:.2f} ms (goal <= 2x): "
                        f"{verdict(gw_cpu <= 2 * ng_cpu)}"
                    )
    return out


NGINX_CONF = """
daemon off;
worker_processes 1;
{user}
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/nginx-body;
    proxy_temp_path {tmp}/nginx-proxy;
    fastcgi_temp_path {tmp}/nginx-fastcgi;
    uwsgi_temp_path {tmp}/nginx-uwsgi;
    scgi_temp_path {tmp}/nginx-scgi;
    keepalive_requests 1000000;
    upstream fake {{
        server 127.0.0.1:{upstream_port};
        keepalive 1024;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{
            proxy_pass http://fake;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 60s;
        }}
    }}
}}
"""


def nginx_command(tmp: Path, port: int, upstream_port: int) -> list[str] | None:
    """nginx as a plain streaming reverse proxy (one worker), or None without nginx."""
    binary = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )
    if binary is None:
        return None
    conf = tmp / "nginx.conf"
    user = "user root;" if os.geteuid() == 0 else ""
    conf.write_text(NGINX_CONF.format(user=user, tmp=tmp, port=port, upstream_port=upstream_port))
    return [binary, "-p", str(tmp), "-e", str(tmp / "nginx-error.log"), "-c", str(conf)]


def gateway_command(port: int, workers: int, profile: Path | None) -> list[str]:
    if profile is not None:
        cmd = [sys.executable, "-m", "bench.gateway_overhead", "--serve-profiled"]
        return [*cmd, str(port), str(profile.resolve())]
    # `specroute gateway serve`, the command a deployment runs (workers as it would set them).
    cmd = [sys.executable, "-c", "from control.cli import app; app()", "gateway", "serve"]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    cmd += ["--workers", str(workers)]
    if workers > 1:
        cmd += ["--local-quotas"]  # the bench tenant has no budget; no Redis in this run
    return cmd


def write_results(path: Path, text: str) -> None:
    """Replace only the gateway section; other sections (Engine, ...) stay as they are."""
    old = path.read_text() if path.exists() else "# Benchmark results\n"
    start = old.find(SECTION)
    if start == -1:
        new = old.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
    else:
        nxt = old.find("\n## ", start + len(SECTION))
        end = len(old) if nxt == -1 else nxt + 1
        new = old[:start] + text.rstrip("\n") + "\n" + ("\n" + old[end:] if nxt != -1 else "")
    path.write_text(new)


def serve_profiled(port: int, out: Path) -> None:
    """The gateway under cProfile (CPU-time clock), stats dumped to `out` on SIGTERM."""
    import contextlib
    import cProfile
    import signal

    import uvicorn

    from gateway.app import create_app

    class Server(uvicorn.Server):
        # NOTE: uvicorn re-raises a captured SIGTERM after shutdown, which would kill
        # the process before the stats are written; take the signal ourselves instead.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    config = uvicorn.Config(
        create_app(), host="127.0.0.1", port=port, log_level="warning", access_log=False
    )
    server = Server(config)
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    server.run()
    profile.disable()
    profile.dump_stats(out)


def profile_by_package(path: Path, top: int = 12) -> list[str]:
    """Exclusive CPU time grouped by package: where a request's CPU goes, without overlap."""
    import pstats

    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    groups: Counter[str] = Counter()
    for (filename, _line, _name), (_cc, _nc, own_s, _cum, _callers) in stats.items():
        if "site-packages/" in filename:
            key = filename.split("site-packages/")[1].split("/")[0]
        elif "/gateway/" in filename:
            key = "gateway." + filename.split("/gateway/")[1].split("/")[0].removesuffix(".py")
        else:
            key = "python stdlib and builtins"
        groups[key] += own_s
    total = sum(groups.values())
    return [f"- {100 * t / total:4.1f} %  {k}" for k, t in groups.most_common(top)]


def _terminate(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in reversed(procs):
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)  # a profiled gateway writes its stats on the way out
        except subprocess.TimeoutExpired:
            proc.kill()


def _stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM: stop every process the run started, then exit 130 (as after Ctrl-C)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut this short
    print("interrupted: stopping every process the run started", file=sys.stderr, flush=True)
    _terminate(procs)
    os._exit(130)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--concurrency", default="1,64,256")
    p.add_argument(
        "--requests",
        default="0",
        help="per target and level, one number or one per level (300,2048); 0: max(150, 8 x conc)",
    )
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--interval-ms", type=float, default=5.0)
    p.add_argument("--endpoint", choices=["chat", "completions"], default="chat")
    p.add_argument(
        "--gateway-workers",
        default="1",
        help="gateway process counts to run side by side, e.g. 1,2 (`serve --workers N`)",
    )
    p.add_argument("--no-nginx", action="store_true", help="leave nginx out")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="above concurrency 1: split each target's requests into this many runs, "
        "taken in ABBA order over the targets (for a shared machine)",
    )
    p.add_argument("--write-results", type=Path, default=None)
    p.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="run the (one-process) gateway under cProfile and write its stats here (slows it ~2x)",
    )
    p.add_argument("--serve-profiled", nargs=2, metavar=("PORT", "OUT"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.serve_profiled:
        serve_profiled(int(a.serve_profiled[0]), Path(a.serve_profiled[1]))
        return
    levels = [int(c) for c in a.concurrency.split(",")]
    counts = [int(n) for n in a.requests.split(",")]
    if len(counts) == 1:
        counts *= len(levels)
    if len(counts) != len(levels):
        p.error("--requests: one number, or one per --concurrency level")
    worker_counts = [int(w) for w in a.gateway_workers.split(",")]
    if a.profile is not None:
        worker_counts = [1]
    load = os.getloadavg()[0]
    path = "/v1/chat/completions" if a.endpoint == "chat" else "/v1/completions"
    body = request_body(a.endpoint)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    up_port = free_port()
    upstream_cmd = [sys.executable, "-m", "engine.fake", "--port", str(up_port)]
    upstream_cmd += ["--tokens", str(a.tokens), "--interval-ms", str(a.interval_ms)]
    procs: list[subprocess.Popen[bytes]] = []
    results: list[list[RunResult]] = []
    nginx_note = ""
    with tempfile.TemporaryDirectory() as tmp:
        snap = Path(tmp) / "snapshot.json"
        write_snapshot(snap, f"http://127.0.0.1:{up_port}")
        gw_env = {**env, "SPECROUTE_GATEWAY_SNAPSHOT_FILE": str(snap)}
        gw_env.pop("SPECROUTE_GATEWAY_REDIS_URL", None)
        gw_env.pop("SPECROUTE_GATEWAY_GATEWAY_ID", None)
        # NOTE: stopped by SIGTERM (`timeout`, `kill`) it stops every process it started
        # and exits 130 at once, from the handler: raised as KeyboardInterrupt inside the
        # load generator's event loop, the stop could hang in the loop's own clean-up.
        signal.signal(signal.SIGTERM, lambda *_: _stop_all(procs))
        try:
            upstream = subprocess.Popen(upstream_cmd, env=env)
            procs.append(upstream)
            wait_ready(f"http://127.0.0.1:{up_port}/health", upstream)
            up_proc = psutil.Process(upstream.pid)
            targets = [Target("direct", f"http://127.0.0.1:{up_port}", [])]
            ng_port = free_port()
            ng_cmd = None if a.no_nginx else nginx_command(Path(tmp), ng_port, up_port)
            if ng_cmd is not None:
                nginx = subprocess.Popen(ng_cmd, env=env)
                procs.append(nginx)
                wait_ready(f"http://127.0.0.1:{ng_port}/health", nginx)
                version = subprocess.run(
                    [ng_cmd[0], "-v"], capture_output=True, text=True, check=False
                ).stderr.strip()
                nginx_note = f" nginx: {version.removeprefix('nginx version: ')}, 1 worker."
                targets.append(Target("nginx", f"http://127.0.0.1:{ng_port}", tree(nginx.pid)))
            elif not a.no_nginx:
                print("nginx not found: the nginx rows are left out", file=sys.stderr)
            for workers in worker_counts:
                gw_port = free_port()
                gateway = subprocess.Popen(gateway_command(gw_port, workers, a.profile), env=gw_env)
                procs.append(gateway)
                wait_ready(f"http://127.0.0.1:{gw_port}/readyz", gateway)
                if workers > 1:
                    time.sleep(2.0)  # every worker up (readyz answered from the first)
                mode = "gateway" if workers == 1 else f"gateway x{workers}"
                targets.append(Target(mode, f"http://127.0.0.1:{gw_port}", tree(gateway.pid)))
            for c, n in zip(levels, counts, strict=True):
                total = n or max(150, 8 * c)
                if c == 1:
                    runs = run_interleaved(targets, path, body, total, up_proc)
                else:
                    runs = run_rounds(targets, path, body, c, total, a.rounds, up_proc)
                results.append(runs)
                print(f"concurrency {c}: " + ", ".join(f"{r.mode} {r.rps:.1f} req/s" for r in runs))
        except KeyboardInterrupt:
            print("interrupted: stopping every process the run started", file=sys.stderr)
            raise SystemExit(130) from None
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)  # a second signal must not cut this short
            _terminate(procs)
    end_load = os.getloadavg()[0]
    cmd = "python -m bench.gateway_overhead " + " ".join(sys.argv[1:])
    loadgen = ", ".join(
        f"c={runs[0].concurrency}: {100 * max(r.loadgen_cpu_s / r.wall_s for r in runs):.0f} %"
        for runs in results
    )
    report = "\n".join(
        [
            SECTION,
            "",
            f"Command: `{cmd.strip()}` ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
            f"{psutil.cpu_count()} CPUs shared, load average {load:.1f} at start, "
            f"{end_load:.1f} at end). "
            f"Upstream: engine.fake, {a.tokens} tokens every {a.interval_ms} ms, "
            f"streaming {a.endpoint}; closed loop, aiohttp client"
            + ("; concurrency 1 interleaves the modes" if 1 in levels else "")
            + (f"; higher ones take {a.rounds} rounds in ABBA order" if a.rounds > 1 else "")
            + "; "
            + "latencies in ms, TPOT = (last token - first token) / (tokens - 1); "
            "CPU ms/req: the proxy's whole process tree." + nginx_note,
            "",
            table(results),
            "",
            *goals(results),
            f"- load generator CPU (of one core): {loadgen}",
        ]
    )
    if a.profile is not None:
        report += "\n\nGateway CPU by package (cProfile, exclusive time):\n"
        report += "\n".join(profile_by_package(a.profile))
    print(report)
    if a.write_results is not None:
        write_results(a.write_results, report)


if __name__ == "__main__":
    main()
