"""Gateway overhead: a fake upstream called directly vs through the real gateway.

    python -m bench.gateway_overhead [--concurrency 1,64,256] [--write-results bench/RESULTS.md]

Starts ``bench.fake_upstream`` (fixed tokens at a fixed pace) and the real
``gateway.app:create_app`` under uvicorn, each as its own process, with a
snapshot file whose only pool points at the upstream. At each concurrency it
runs closed-loop streaming chat requests, first direct then through the
gateway, and reports TTFT and per-token latency (p50/p99), requests/s and the
gateway's CPU seconds per request (psutil on its process). Loopback only.

Added TTFT is p(gateway) - p(direct) of the same percentile: both runs see the
same upstream schedule, so the difference is what the gateway adds. At
concurrency 1 the two modes are interleaved request by request (direct,
gateway, gateway, direct, ...) in one loop, so a drift of the machine's state
during the run (CPU placement, frequency, neighbours) shifts both alike; at
higher concurrency they run one after the other, since running them together
would make them compete for the same upstream.
"""

import argparse
import asyncio
import hashlib
import json
import os
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

from control.contract import PolicySnapshot, PoolSnapshot, TenantSpec, WorkerSpec

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


async def interleaved(
    urls: tuple[str, str], body: bytes, total: int
) -> tuple[list[Sample], list[Sample]]:
    """One request at a time, alternating the two URLs (ABBA order); samples per URL."""
    out: tuple[list[Sample], list[Sample]] = ([], [])
    async with load_session() as session:
        for i in range(total):
            for which in (0, 1) if i % 2 == 0 else (1, 0):
                out[which].append(await one_request(session, urls[which], body))
    return out


def drive(coro: Coroutine[Any, Any, T]) -> T:
    # uvloop keeps the load generator's own per-chunk cost low, so it is not the bottleneck.
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def run(
    mode: str,
    url: str,
    body: bytes,
    concurrency: int,
    total: int,
    upstream: psutil.Process,
    gateway: psutil.Process | None,
) -> RunResult:
    # Warm-up: open the connections and let both servers' caches settle.
    drive(closed_loop(url, body, concurrency, min(concurrency * 2, total)))
    me = psutil.Process()
    cpu0 = sum(gateway.cpu_times()[:2]) if gateway else None
    up0 = sum(upstream.cpu_times()[:2])
    me0 = sum(me.cpu_times()[:2])
    t0 = time.perf_counter()
    samples = drive(closed_loop(url, body, concurrency, total))
    wall = time.perf_counter() - t0
    cpu = None if gateway is None or cpu0 is None else sum(gateway.cpu_times()[:2]) - cpu0
    up = sum(upstream.cpu_times()[:2]) - up0
    return RunResult(mode, concurrency, samples, wall, cpu, up, sum(me.cpu_times()[:2]) - me0)


def run_interleaved(
    direct_url: str,
    gateway_url: str,
    body: bytes,
    total: int,
    upstream: psutil.Process,
    gateway: psutil.Process,
) -> tuple[RunResult, RunResult]:
    """Concurrency 1, both modes in one loop. Each mode's wall time is the sum of its
    requests' end-to-end times; the upstream's and load generator's CPU are split evenly."""
    drive(interleaved((direct_url, gateway_url), body, 4))  # warm-up
    me = psutil.Process()
    cpu0, up0, me0 = (sum(p.cpu_times()[:2]) for p in (gateway, upstream, me))
    direct, through = drive(interleaved((direct_url, gateway_url), body, total))
    cpu, up, mine = (
        sum(p.cpu_times()[:2]) - c0 for p, c0 in ((gateway, cpu0), (upstream, up0), (me, me0))
    )

    def result(mode: str, samples: list[Sample], gw_cpu: float | None) -> RunResult:
        wall = sum(x.e2e_ms for x in samples if x.ok) / 1000.0 or 1e-9
        return RunResult(mode, 1, samples, wall, gw_cpu, up / 2, mine / 2)

    return result("direct", direct, None), result("gateway", through, cpu)


def table(pairs: list[tuple[RunResult, RunResult]]) -> str:
    head = (
        "| conc | mode | n | err | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | req/s "
        "| added TTFT p50 / p99 | added TPOT p50 / p99 | req/s ratio | gw CPU ms/req "
        "| upstream CPU ms/req |"
    )
    lines = [head, "|" + "---|" * 14]
    for direct, gw in pairs:
        for r in (direct, gw):
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
            if r is gw:
                row += [
                    f"{gw.pct('ttft_ms', 50) - direct.pct('ttft_ms', 50):+.2f} / "
                    f"{gw.pct('ttft_ms', 99) - direct.pct('ttft_ms', 99):+.2f}",
                    f"{gw.pct('tpot_ms', 50) - direct.pct('tpot_ms', 50):+.3f} / "
                    f"{gw.pct('tpot_ms', 99) - direct.pct('tpot_ms', 99):+.3f}",
                    f"{gw.rps / direct.rps:.2f}",
                    f"{gw.cpu_per_request_ms:.2f}" if gw.cpu_per_request_ms is not None else "",
                ]
            else:
                row += ["", "", "", ""]
            row.append(f"{r.upstream_cpu_per_request_ms:.2f}")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def goals(pairs: list[tuple[RunResult, RunResult]]) -> list[str]:
    out = []
    for direct, gw in pairs:
        if direct.concurrency == 1:
            added = gw.pct("ttft_ms", 50) - direct.pct("ttft_ms", 50)
            verdict = "met" if added < 1.0 else "MISSED"
            out.append(
                f"- added TTFT p50 at concurrency 1: {added:.2f} ms (goal < 1 ms): {verdict}"
            )
        if direct.concurrency == 64:
            ratio = gw.rps / direct.rps
            verdict = "met" if ratio >= 0.8 else "MISSED"
            out.append(f"- req/s ratio at concurrency 64: {ratio:.2f} (goal >= 0.80): {verdict}")
    return out


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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--concurrency", default="1,64,256")
    p.add_argument("--requests", type=int, default=0, help="per run; 0: max(150, 8 x conc)")
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--interval-ms", type=float, default=5.0)
    p.add_argument("--endpoint", choices=["chat", "completions"], default="chat")
    p.add_argument("--write-results", type=Path, default=None)
    p.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="run the gateway under cProfile and write its stats here (slows it ~2x)",
    )
    p.add_argument("--serve-profiled", nargs=2, metavar=("PORT", "OUT"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.serve_profiled:
        serve_profiled(int(a.serve_profiled[0]), Path(a.serve_profiled[1]))
        return
    levels = [int(c) for c in a.concurrency.split(",")]
    load = os.getloadavg()[0]
    path = "/v1/chat/completions" if a.endpoint == "chat" else "/v1/completions"
    body = request_body(a.endpoint)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    up_port, gw_port = free_port(), free_port()
    upstream_cmd = [sys.executable, "-m", "bench.fake_upstream", "--port", str(up_port)]
    upstream_cmd += ["--tokens", str(a.tokens), "--interval-ms", str(a.interval_ms)]
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp:
        snap = Path(tmp) / "snapshot.json"
        write_snapshot(snap, f"http://127.0.0.1:{up_port}")
        gw_env = {**env, "SPECROUTE_GATEWAY_SNAPSHOT_FILE": str(snap)}
        gw_env.pop("SPECROUTE_GATEWAY_REDIS_URL", None)
        gateway_cmd = [sys.executable, "-m", "uvicorn", "gateway.app:create_app", "--factory"]
        gateway_cmd += ["--host", "127.0.0.1", "--port", str(gw_port), "--no-access-log"]
        gateway_cmd += ["--log-level", "warning", "--backlog", "4096"]
        if a.profile is not None:
            gateway_cmd = [sys.executable, "-m", "bench.gateway_overhead", "--serve-profiled"]
            gateway_cmd += [str(gw_port), str(a.profile.resolve())]
        try:
            upstream = subprocess.Popen(upstream_cmd, env=env)
            procs.append(upstream)
            wait_ready(f"http://127.0.0.1:{up_port}/health", upstream)
            gateway = subprocess.Popen(gateway_cmd, env=gw_env)
            procs.append(gateway)
            wait_ready(f"http://127.0.0.1:{gw_port}/readyz", gateway)
            gw_proc, up_proc = psutil.Process(gateway.pid), psutil.Process(upstream.pid)
            pairs = []
            for c in levels:
                total = a.requests or max(150, 8 * c)
                direct_url = f"http://127.0.0.1:{up_port}{path}"
                gw_url = f"http://127.0.0.1:{gw_port}{path}"
                if c == 1:
                    direct, gw = run_interleaved(direct_url, gw_url, body, total, up_proc, gw_proc)
                else:
                    direct = run("direct", direct_url, body, c, total, up_proc, None)
                    gw = run("gateway", gw_url, body, c, total, up_proc, gw_proc)
                pairs.append((direct, gw))
                print(f"concurrency {c}: direct {direct.rps:.1f} req/s, gateway {gw.rps:.1f} req/s")
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=30)  # a profiled gateway writes its stats on the way out
                except subprocess.TimeoutExpired:
                    proc.kill()
    cmd = "python -m bench.gateway_overhead " + " ".join(sys.argv[1:])
    loadgen = ", ".join(
        f"c={d.concurrency}: {100 * max(r.loadgen_cpu_s / r.wall_s for r in (d, g)):.0f} %"
        for d, g in pairs
    )
    report = "\n".join(
        [
            SECTION,
            "",
            f"Command: `{cmd.strip()}` ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
            f"{psutil.cpu_count()} CPUs shared, load average {load:.1f} at start). "
            f"Upstream: bench.fake_upstream, {a.tokens} tokens every {a.interval_ms} ms, "
            f"streaming {a.endpoint}; closed loop, aiohttp client"
            + ("; concurrency 1 interleaves direct and gateway requests; " if 1 in levels else "; ")
            + "latencies in ms, TPOT = (last token - first token) / (tokens - 1).",
            "",
            table(pairs),
            "",
            *goals(pairs),
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
