"""How far a tenant's quota is overshot when Redis is slow, for 1..N gateway replicas.

Each replica is the gateway's own quota limiter (`make_quota_limiter`: Redis guarded
by the failure mode, with its own connection pool and its own local fallback), all
sharing one real Redis through `SlowRedisProxy`. A burst of concurrent admissions
arrives in waves (so Redis is retried between them); every admitted request is
settled at the cost it reserved. Overshoot = weighted tokens admitted in the window
/ the budget; the bound to hold is 1.0 per replica (plus at most one request each).

    python -m tests.hostile.quota_overshoot --replicas 1 2 3 --requests 300 500
"""

import argparse
import asyncio
import logging
import uuid
from dataclasses import dataclass

from gateway.quota import make_quota_limiter
from gateway.quota.guarded import GuardedQuotaLimiter
from specwire import QuotaSpec, TenantSpec


@dataclass(frozen=True)
class Overshoot:
    replicas: int
    requests: int
    admitted: int
    admitted_tokens: float
    budget: float
    store_failures: int

    @property
    def ratio(self) -> float:
        return self.admitted_tokens / self.budget


async def measure(
    redis_url: str,
    *,
    replicas: int,
    requests: int,
    budget: int = 2000,
    reserve: float = 20.0,
    waves: int = 5,
    wave_gap_s: float = 0.3,
    timeout_s: float = 0.1,
    retry_s: float = 0.2,
    mode: str = "local",
) -> Overshoot:
    """Send `requests` admissions of `reserve` tokens, spread over the replicas, in
    `waves` concurrent waves; return what was admitted. A fresh tenant id each run,
    so runs (and other users of the same Redis) never share a window."""
    tenant = TenantSpec(
        id=uuid.uuid4().int % 10**12,
        name="overshoot",
        key_hashes=[],
        quota=QuotaSpec(weighted_tokens_per_minute=budget),
    )
    limiters: list[GuardedQuotaLimiter] = []
    for _ in range(replicas):
        limiter = make_quota_limiter(
            redis_url,
            failure_mode=mode,  # type: ignore[arg-type]
            timeout_s=timeout_s,
            retry_s=retry_s,
        )
        assert isinstance(limiter, GuardedQuotaLimiter)
        limiters.append(limiter)
    admitted = 0

    async def one(index: int) -> None:
        nonlocal admitted
        limiter = limiters[index % replicas]
        verdict = await limiter.admit(tenant, reserve=reserve)
        if verdict.allowed and verdict.reservation is not None:
            admitted += 1
            await limiter.settle(verdict.reservation, reserve)

    per_wave = -(-requests // waves)
    try:
        for start in range(0, requests, per_wave):
            await asyncio.gather(*(one(i) for i in range(start, min(start + per_wave, requests))))
            await asyncio.sleep(wave_gap_s)
    finally:
        for limiter in limiters:
            await limiter.store.aclose()
    return Overshoot(
        replicas=replicas,
        requests=requests,
        admitted=admitted,
        admitted_tokens=admitted * reserve,
        budget=float(budget),
        store_failures=sum(limiter.failures for limiter in limiters),
    )


def main() -> None:
    from tests.hostile.slow_redis import SlowRedisProxy

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--requests", type=int, nargs="+", default=[300, 500])
    parser.add_argument("--redis-port", type=int, default=6379)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # one warning per Redis timeout, hundreds per run
    print(
        "| replicas | concurrent requests | runs | admitted (max) | Redis timeouts "
        "| overshoot max |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for replicas in args.replicas:
        for requests in args.requests:
            runs = []
            for seed in range(args.seeds):
                proxy = SlowRedisProxy(upstream_port=args.redis_port, seed=seed)
                with proxy.running() as url:
                    runs.append(asyncio.run(measure(url, replicas=replicas, requests=requests)))
            worst = max(runs, key=lambda r: r.ratio)
            failures = sum(r.store_failures for r in runs)
            print(
                f"| {replicas} | {requests} | {len(runs)} | {worst.admitted} | "
                f"{failures} | {worst.ratio:.2f}x |"
            )


if __name__ == "__main__":
    main()
