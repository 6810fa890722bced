"""Quotas under a slowed Redis (issue #21): budget 2,000 weighted tokens/min, 300 and
500 concurrent requests, a real Redis behind a proxy that delays its replies 0.02-0.2 s
(against the 0.1 s quota timeout), so calls time out after Redis has run them. Before
the fix one replica admitted 1.22x its budget (3 replicas: 3.67x)."""

import asyncio

import pytest

from tests.fixtures.services import require_redis
from tests.hostile.quota_overshoot import measure
from tests.hostile.slow_redis import SlowRedisProxy

RESERVE = 20.0
BUDGET = 2000


@pytest.mark.redis
# Seeds of the proxy's delays under which today's main overshot (1.34x and 1.32x).
@pytest.mark.parametrize(
    ("replicas", "requests", "seed"), [(1, 300, 4), (1, 500, 1), (2, 300, 1), (3, 500, 0)]
)
def test_a_slow_redis_never_lets_a_replica_exceed_its_budget(
    replicas: int, requests: int, seed: int
) -> None:
    require_redis()
    proxy = SlowRedisProxy(seed=seed)
    with proxy.running() as url:
        result = asyncio.run(
            measure(
                url,
                replicas=replicas,
                requests=requests,
                budget=BUDGET,
                reserve=RESERVE,
            )
        )
    assert result.store_failures > 0, "Redis was not slow enough to time out"
    assert proxy.replies_delayed > 0
    # At most the budget per replica, plus the one request each that crosses the limit.
    assert result.admitted_tokens <= replicas * (BUDGET + RESERVE)
    # And the budget is used, not refused wholesale.
    assert result.admitted_tokens >= BUDGET


@pytest.mark.redis
def test_the_proxy_stalls_replies_for_the_stall_period() -> None:
    """The fault the fleet bench injects with --stall-s: no reply leaves the proxy
    during a stall (here the first 1 s of every 60 s), and it is sent afterwards."""
    import time

    import redis.asyncio as aioredis

    require_redis()
    proxy = SlowRedisProxy(delay_s=(0.0, 0.0), stall_every_s=60.0, stall_s=1.0)

    async def ping(url: str) -> float:
        client = aioredis.Redis.from_url(url)
        try:
            started = time.monotonic()
            assert await client.ping() is True
            return time.monotonic() - started
        finally:
            await client.aclose()

    with proxy.running() as url:
        held = asyncio.run(ping(url))
    assert held >= 0.3, held
    assert proxy.replies_stalled >= 1
