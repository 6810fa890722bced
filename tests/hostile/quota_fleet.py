"""Quota overshoot end to end: real `specroute gateway serve` processes sharing a slowed Redis.

Each replica is its own `specroute gateway serve` process on one snapshot file (a
baseline pool whose worker is a fake engine, `python -m engine.fake`, in its
own process), all reaching one real Redis through `SlowRedisProxy` (fault injection:
Redis cannot be made slow on purpose for some calls and not others). A tenant's
burst of non-streamed chat completions arrives in waves, spread round-robin over the
replicas, over HTTP. Quota weights make a request's reservation exactly its cost
(prompt weight 0, completion weight 1, the engine answering `max_tokens` completion
tokens), so overshoot = completion tokens of the 200 answers / the budget, read from
the answers' usage. Redis timeouts are read from the replicas' /metrics.

    python -m tests.hostile.quota_fleet --replicas 1 2 3 --requests 300 500 --seeds 3
    python -m tests.hostile.quota_fleet --delay-ms 1 5 --stall-s 0.5 --stall-every-s 1.5
"""

import argparse
import asyncio
import hashlib
import os
import random
import re
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from specwire import (
    PolicySnapshot,
    PoolSnapshot,
    QuotaSpec,
    QuotaWeights,
    TenantSpec,
    WorkerSpec,
)
from tests.fixtures.ready import wait_ready
from tests.hostile.slow_redis import SlowRedisProxy

MODEL = "tiny"
TOKENS = 20
"""Completion tokens of every answer, and every request's max_tokens (its reservation)."""
SPECROUTE = str(Path(sys.executable).parent / "specroute")
_FAILURES = re.compile(r"^specroute_gateway_quota_store_failures_total\{[^}]*\} (\S+)$", re.M)


@dataclass(frozen=True)
class Tenant:
    id: int
    name: str
    key: str


@dataclass(frozen=True)
class FleetOvershoot:
    replicas: int
    requests: int
    ok: int
    refused: int  # 429 quota_exceeded
    other: dict[int, int]  # any other status (503 quota_unavailable, a fault...)
    admitted_tokens: float
    budget: float
    store_failures: int

    @property
    def ratio(self) -> float:
        return self.admitted_tokens / self.budget


def new_tenant() -> Tenant:
    """A fresh tenant id each run, so runs (and other users of the same Redis) never
    share a window."""
    number = random.SystemRandom().randrange(10**9, 10**12)
    return Tenant(id=number, name=f"burst-{number}", key=f"sk-sr-{secrets.token_urlsafe(24)}")


def fleet_snapshot(engine_url: str, tenants: list[Tenant], budget: int) -> PolicySnapshot:
    return PolicySnapshot(
        version=1,
        generated_at=datetime.now(UTC),
        ttl_seconds=3600.0,
        pools=[
            PoolSnapshot(
                id=1,
                name="base",
                served_model_name=MODEL,
                target_ref="engine/tiny_pair/target",
                workers=[WorkerSpec(id="p1-w0", pool_id=1, endpoint_url=engine_url, healthy=True)],
            )
        ],
        tenants=[
            TenantSpec(
                id=t.id,
                name=t.name,
                key_hashes=[hashlib.sha256(t.key.encode()).hexdigest()],
                quota=QuotaSpec(weighted_tokens_per_minute=budget),
            )
            for t in tenants
        ],
        quota_weights=QuotaWeights(prompt=0.0, completion=1.0, rejected_draft=0.0),
    )


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def _processes(
    commands: list[tuple[list[str], dict[str, str], str]], ready_path: str, timeout_s: float
) -> Iterator[list[str]]:
    """Start every (argv, env, url) at once, wait until each answers `ready_path`; on
    exit kill them (each started here, by its own handle)."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for argv, env, _ in commands:
            procs.append(
                subprocess.Popen(
                    argv, env=os.environ | env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
                )
            )
        deadline = time.monotonic() + timeout_s
        for proc, (_, _, url) in zip(procs, commands, strict=True):
            wait_ready(url + ready_path, deadline, proc=proc, what=url)
        yield [url for _, _, url in commands]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        for proc in procs:
            proc.wait(timeout=15)


@contextmanager
def fake_engine(*, interval_ms: float = 1.0, timeout_s: float = 60.0) -> Iterator[str]:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "engine.fake",
        "--port",
        str(port),
        "--tokens",
        str(TOKENS),
        "--interval-ms",
        str(interval_ms),
        "--model",
        MODEL,
    ]
    with _processes([(argv, {}, f"http://127.0.0.1:{port}")], "/health", timeout_s) as (url,):
        yield url


@contextmanager
def gateway_fleet(
    snapshot_file: Path,
    redis_url: str,
    replicas: int,
    *,
    retry_s: float = 0.2,
    mode: str = "local",
    timeout_s: float = 60.0,
) -> Iterator[list[str]]:
    """`replicas` `specroute gateway serve` processes on one snapshot file and one Redis."""
    commands = []
    for i in range(replicas):
        port = free_port()
        env = {
            "SPECROUTE_GATEWAY_SNAPSHOT_FILE": str(snapshot_file),
            "SPECROUTE_GATEWAY_REDIS_URL": redis_url,
            "SPECROUTE_GATEWAY_GATEWAY_ID": f"fleet-{i}",
            "SPECROUTE_GATEWAY_QUOTA_REDIS_FAILURE": mode,
            "SPECROUTE_GATEWAY_QUOTA_REDIS_RETRY_S": str(retry_s),
        }
        argv = [SPECROUTE, "gateway", "serve", "--port", str(port), "--log-level", "warning"]
        commands.append((argv, env, f"http://127.0.0.1:{port}"))
    with _processes(commands, "/readyz", timeout_s) as urls:
        yield urls


def store_failures(urls: list[str]) -> int:
    """Quota store (Redis) calls that failed or timed out, summed over the replicas."""
    total = 0.0
    for url in urls:
        text = httpx.get(f"{url}/metrics", timeout=10).text
        total += sum(float(v) for v in _FAILURES.findall(text))
    return int(total)


async def burst(
    urls: list[str],
    tenant: Tenant,
    *,
    requests: int,
    budget: int,
    waves: int = 5,
    wave_gap_s: float = 0.3,
) -> FleetOvershoot:
    """`requests` concurrent chat completions in `waves`, round-robin over `urls`."""
    failures_before = store_failures(urls)
    ok = refused = 0
    admitted = 0.0
    other: dict[int, int] = {}
    headers = {"Authorization": f"Bearer {tenant.key}"}
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": TOKENS,
    }
    limits = httpx.Limits(max_connections=requests, max_keepalive_connections=requests)
    async with httpx.AsyncClient(timeout=60.0, limits=limits) as client:

        async def one(index: int) -> None:
            nonlocal ok, refused, admitted
            url = urls[index % len(urls)]
            try:
                r = await client.post(f"{url}/v1/chat/completions", json=body, headers=headers)
            except httpx.HTTPError:
                other[0] = other.get(0, 0) + 1
                return
            if r.status_code == 200:
                ok += 1
                admitted += float(r.json()["usage"]["completion_tokens"])
            elif r.status_code == 429:
                refused += 1
            else:
                other[r.status_code] = other.get(r.status_code, 0) + 1

        per_wave = -(-requests // waves)
        for start in range(0, requests, per_wave):
            await asyncio.gather(*(one(i) for i in range(start, min(start + per_wave, requests))))
            await asyncio.sleep(wave_gap_s)
    return FleetOvershoot(
        replicas=len(urls),
        requests=requests,
        ok=ok,
        refused=refused,
        other=other,
        admitted_tokens=admitted,
        budget=float(budget),
        store_failures=store_failures(urls) - failures_before,
    )


@contextmanager
def slow_fleet(
    work: Path,
    tenants: list[Tenant],
    *,
    replicas: int,
    budget: int,
    seed: int,
    redis_port: int = 6379,
    delay_s: tuple[float, float] = (0.02, 0.2),
    stall_every_s: float = 1.0,
    stall_s: float = 0.0,
) -> Iterator[tuple[list[str], SlowRedisProxy]]:
    """A fake engine, a slowed Redis and `replicas` gateway processes for `tenants`."""
    proxy = SlowRedisProxy(
        upstream_port=redis_port,
        delay_s=delay_s,
        seed=seed,
        stall_every_s=stall_every_s,
        stall_s=stall_s,
    )
    with ExitStack() as stack:
        engine = stack.enter_context(fake_engine())
        redis_url = stack.enter_context(proxy.running())
        snapshot = work / "snapshot.json"
        snapshot.write_text(fleet_snapshot(engine, tenants, budget).model_dump_json())
        urls = stack.enter_context(gateway_fleet(snapshot, redis_url, replicas))
        yield urls, proxy


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--requests", type=int, nargs="+", default=[300, 500])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--redis-port", type=int, default=6379)
    parser.add_argument(
        "--delay-ms", type=float, nargs=2, default=[20.0, 200.0], metavar=("MIN", "MAX")
    )
    parser.add_argument(
        "--stall-s", type=float, default=0.0, help="hold every reply this long each period"
    )
    parser.add_argument("--stall-every-s", type=float, default=1.0)
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"Redis replies delayed {args.delay_ms[0]:g}-{args.delay_ms[1]:g} ms; stalls "
        + (f"of {args.stall_s:g} s every {args.stall_every_s:g} s" if args.stall_s else "none")
    )
    print(
        "| replicas | concurrent requests | runs | 200 (min-max) | 429 (all runs) | other "
        "| Redis timeouts (all runs) | overshoot max |"
    )
    print("|---:|---:|---:|---:|---:|---|---:|---:|")
    for replicas in args.replicas:
        runs: dict[int, list[FleetOvershoot]] = {n: [] for n in args.requests}
        for seed in range(args.seeds):
            # One fleet per seed, a fresh tenant per burst (its own Redis window).
            tenants = {n: new_tenant() for n in args.requests}
            with (
                tempfile.TemporaryDirectory() as work,
                slow_fleet(
                    Path(work),
                    list(tenants.values()),
                    replicas=replicas,
                    budget=args.budget,
                    seed=seed,
                    redis_port=args.redis_port,
                    delay_s=(args.delay_ms[0] / 1000, args.delay_ms[1] / 1000),
                    stall_every_s=args.stall_every_s,
                    stall_s=args.stall_s,
                ) as (urls, _),
            ):
                for n, tenant in tenants.items():
                    runs[n].append(asyncio.run(burst(urls, tenant, requests=n, budget=args.budget)))
        for n, results in runs.items():
            worst = max(results, key=lambda r: r.ratio)
            others: dict[int, int] = {}
            for r in results:
                for status, count in r.other.items():
                    others[status] = others.get(status, 0) + count
            print(
                f"| {replicas} | {n} | {len(results)} | "
                f"{min(r.ok for r in results)}-{worst.ok} | "
                f"{sum(r.refused for r in results)} | "
                f"{', '.join(f'{s}: {c}' for s, c in sorted(others.items())) or '-'} | "
                f"{sum(r.store_failures for r in results)} | {worst.ratio:.2f}x |"
            )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
