"""Weighted-token quotas: in-memory and on a real Redis shared by two limiters."""

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import redis.asyncio as redis

from gateway.quota import make_quota_limiter, weighted_cost
from gateway.quota.guarded import GuardedQuotaLimiter
from gateway.quota.memory import InMemoryQuotaLimiter
from gateway.quota.redis_limiter import RedisQuotaLimiter, StoreOp
from specwire import QuotaSpec, QuotaWeights, TenantSpec
from tests.fixtures.services import require_redis
from tests.hostile.slow_redis import SlowRedisProxy

WEIGHTS = QuotaWeights(prompt=1.0, completion=2.0, rejected_draft=0.25)


def tenant(limit: int | None, tenant_id: int = 1) -> TenantSpec:
    return TenantSpec(
        id=tenant_id,
        name=f"t{tenant_id}",
        key_hashes=[],
        quota=QuotaSpec(weighted_tokens_per_minute=limit),
    )


async def spend(limiter: InMemoryQuotaLimiter | RedisQuotaLimiter, t: TenantSpec) -> None:
    """Costs 10*1 + 20*2 + 40*0.25 = 60 weighted tokens."""
    await limiter.charge(
        t, prompt_tokens=10, completion_tokens=20, rejected_draft_tokens=40, weights=WEIGHTS
    )


def test_weighted_cost_charges_rejected_drafts_only_with_their_weight() -> None:
    assert weighted_cost(
        prompt_tokens=10, completion_tokens=20, rejected_draft_tokens=40, weights=WEIGHTS
    ) == pytest.approx(60.0)
    free_drafts = QuotaWeights(prompt=1.0, completion=1.0, rejected_draft=0.0)
    good = weighted_cost(
        prompt_tokens=5, completion_tokens=50, rejected_draft_tokens=3, weights=free_drafts
    )
    poor = weighted_cost(
        prompt_tokens=5, completion_tokens=50, rejected_draft_tokens=300, weights=free_drafts
    )
    assert good == poor == 55.0


class FakeClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


async def test_in_memory_budget_and_exact_retry_after() -> None:
    clock = FakeClock(1000.25)
    limiter = InMemoryQuotaLimiter(clock=clock)
    t = tenant(100)
    first = await limiter.admit(t)
    assert (first.allowed, first.used, first.limit) == (True, 0.0, 100)
    await spend(limiter, t)  # 60 in second 1000
    clock.t = 1010.5
    assert (await limiter.admit(t)).used == pytest.approx(60.0)
    await spend(limiter, t)  # 60 in second 1010: 120 >= 100
    clock.t = 1020.0
    over = await limiter.admit(t)
    assert not over.allowed
    assert over.used == pytest.approx(120.0)
    # Dropping second 1000's 60 brings the window to 60 < 100: at 1000 + 60.
    assert over.retry_after_s == pytest.approx(40.0)
    clock.t = 1059.99
    assert not (await limiter.admit(t)).allowed
    clock.t = 1060.0
    back = await limiter.admit(t)
    assert back.allowed and back.used == pytest.approx(60.0)
    other = await limiter.admit(tenant(100, tenant_id=2))
    assert other.allowed and other.used == 0.0  # budgets are per tenant


async def test_unlimited_tenants_are_never_tracked() -> None:
    limiter = InMemoryQuotaLimiter()
    t = tenant(None)
    for _ in range(3):
        await spend(limiter, t)
    verdict = await limiter.admit(t)
    assert verdict.allowed and verdict.limit is None and verdict.used == 0.0


def test_make_quota_limiter_picks_the_backend() -> None:
    assert isinstance(make_quota_limiter(None), InMemoryQuotaLimiter)
    shared = make_quota_limiter("redis://127.0.0.1:6379/0")
    assert isinstance(shared, GuardedQuotaLimiter)
    assert isinstance(shared.store, RedisQuotaLimiter) and shared.mode == "local"


@pytest_asyncio.fixture(loop_scope="function")
async def redis_prefix() -> AsyncIterator[str]:
    url = require_redis()
    prefix = f"specroute:test-quota:{uuid.uuid4().hex}"
    yield prefix
    client = redis.Redis.from_url(url)
    keys = [k async for k in client.scan_iter(match=prefix + ":*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


def redis_limiter(prefix: str, window_s: int = 60) -> RedisQuotaLimiter:
    return RedisQuotaLimiter.from_url(require_redis(), key_prefix=prefix, window_s=window_s)


@pytest.mark.redis
async def test_two_replicas_on_one_redis_share_the_budget(redis_prefix: str) -> None:
    a, b = redis_limiter(redis_prefix), redis_limiter(redis_prefix)
    t = tenant(100)
    try:
        await spend(a, t)
        seen_by_b = await b.admit(t)
        assert seen_by_b.allowed and seen_by_b.used == pytest.approx(60.0)
        await spend(b, t)
        for replica in (a, b):
            over = await replica.admit(t)
            assert not over.allowed
            assert over.used == pytest.approx(120.0)
            assert over.limit == 100
            assert 0.0 < over.retry_after_s <= 60.0
        ttl = await a.client.ttl(a.key(t))
        assert 0 < ttl <= 61  # idle tenants' keys disappear
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.redis
async def test_concurrent_charges_from_two_replicas_are_all_counted(redis_prefix: str) -> None:
    a, b = redis_limiter(redis_prefix), redis_limiter(redis_prefix)
    t = tenant(1_000_000)
    ones = QuotaWeights(prompt=1.0, completion=1.0, rejected_draft=1.0)
    try:
        await asyncio.gather(
            *(
                lim.charge(
                    t, prompt_tokens=1, completion_tokens=1, rejected_draft_tokens=1, weights=ones
                )
                for lim in [a, b] * 100
            )
        )
        assert (await a.admit(t)).used == pytest.approx(600.0)
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.redis
async def test_redis_window_slides_and_retry_after_is_accurate(redis_prefix: str) -> None:
    limiter = redis_limiter(redis_prefix, window_s=2)
    t = tenant(50)
    try:
        await spend(limiter, t)
        over = await limiter.admit(t)
        assert not over.allowed
        assert 1.0 <= over.retry_after_s <= 2.0
        await asyncio.sleep(over.retry_after_s - 0.3)
        assert not (await limiter.admit(t)).allowed
        await asyncio.sleep(0.4)
        back = await limiter.admit(t)
        assert back.allowed and back.used == 0.0
        assert await limiter.client.hlen(limiter.key(t)) == 0  # expired buckets pruned
    finally:
        await limiter.aclose()


async def test_unreachable_redis_raises_for_the_guard_to_decide() -> None:
    import socket

    from redis.exceptions import RedisError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    limiter = RedisQuotaLimiter.from_url(f"redis://127.0.0.1:{port}/0")
    try:
        with pytest.raises(RedisError):
            await limiter.admit(tenant(10))
    finally:
        await limiter.aclose()


async def test_in_memory_reservations_are_seen_at_once_and_settled_to_the_cost() -> None:
    clock = FakeClock(2000.0)
    limiter = InMemoryQuotaLimiter(clock=clock)
    t = tenant(100)
    first = await limiter.admit(t, reserve=40.0)
    second = await limiter.admit(t, reserve=40.0)
    third = await limiter.admit(t, reserve=40.0)  # 80 < 100: still admitted
    fourth = await limiter.admit(t, reserve=40.0)
    assert [v.allowed for v in (first, second, third, fourth)] == [True, True, True, False]
    assert fourth.used == pytest.approx(120.0)
    assert first.reservation is not None and first.reservation.amount == 40.0
    # Settling replaces the reservation by the cost: a refund, then a top-up.
    await limiter.settle(first.reservation, 10.0)
    assert second.reservation is not None
    await limiter.settle(second.reservation, 55.0)
    assert (await limiter.admit(t)).used == pytest.approx(10.0 + 55.0 + 40.0)
    # A reservation that already left the window changes nothing.
    clock.t = 2061.0
    assert third.reservation is not None
    await limiter.settle(third.reservation, 500.0)
    assert (await limiter.admit(t)).used == 0.0


@pytest.mark.redis
async def test_redis_reservations_are_shared_and_settled(redis_prefix: str) -> None:
    a, b = redis_limiter(redis_prefix), redis_limiter(redis_prefix)
    t = tenant(100)
    try:
        reserved = await a.admit(t, reserve=70.0)
        assert reserved.allowed and reserved.reservation is not None
        seen = await b.admit(t, reserve=70.0)  # 70 < 100: admitted, now 140 booked
        assert seen.allowed and seen.used == pytest.approx(70.0)
        refused = await a.admit(t, reserve=70.0)
        assert not refused.allowed and refused.used == pytest.approx(140.0)
        await a.settle(reserved.reservation, 5.0)
        assert seen.reservation is not None
        await b.settle(seen.reservation, 0.0)
        assert (await b.admit(t)).used == pytest.approx(5.0)
    finally:
        await a.aclose()
        await b.aclose()


async def window_total(prefix: str, t: TenantSpec) -> float:
    """What Redis holds in the tenant's window, read from its hash."""
    client = redis.Redis.from_url(require_redis())
    try:
        fields = await client.hgetall(f"{prefix}:{t.id}")
    finally:
        await client.aclose()
    return sum(float(v) for v in fields.values())


@pytest.mark.redis
async def test_replayed_calls_take_effect_exactly_once(redis_prefix: str) -> None:
    store = redis_limiter(redis_prefix)
    t = tenant(1000)
    try:
        booked = await store.admit(t, reserve=70.0, token="a1")
        assert booked.reservation is not None and booked.reservation.token == "a1"
        assert await window_total(redis_prefix, t) == pytest.approx(70.0)
        # An admission the gateway gave up on is cancelled once, however often replayed.
        assert await store.reconcile(t.id, [StoreOp("cancel", "a1")]) == 1
        assert await store.reconcile(t.id, [StoreOp("cancel", "a1")]) == 0
        assert await window_total(redis_prefix, t) == pytest.approx(0.0)
        # Its settle comes to nothing: the booking is gone.
        await store.settle(booked.reservation, 500.0)
        assert await window_total(redis_prefix, t) == pytest.approx(0.0)
        # A cancel that reaches Redis before its admission leaves a tombstone.
        assert await store.reconcile(t.id, [StoreOp("cancel", "late")]) == 0
        late = await store.admit(t, reserve=40.0, token="late")
        assert late.allowed and await window_total(redis_prefix, t) == pytest.approx(0.0)
        # A charge retried after it ran counts once; one that never ran counts on retry.
        await store.charge_cost(t, 25.0, token="c1")
        charges = [StoreOp("charge", "c1", amount=25.0), StoreOp("charge", "c2", amount=5.0)]
        assert await store.reconcile(t.id, charges) == 1
        assert await store.reconcile(t.id, charges) == 0
        assert await window_total(redis_prefix, t) == pytest.approx(30.0)
        # A settle applies once, first try or replay.
        second = await store.admit(t, reserve=50.0, token="s1")
        assert second.reservation is not None
        await store.settle(second.reservation, 10.0)
        replay = StoreOp("settle", "s1", second.reservation.second, -40.0)
        assert await store.reconcile(t.id, [replay]) == 0
        assert await window_total(redis_prefix, t) == pytest.approx(40.0)
    finally:
        await store.aclose()


@pytest.mark.redis
async def test_a_timed_out_admission_does_not_leave_redis_over_counting(
    redis_prefix: str,
) -> None:
    """Redis answers after the guard's timeout (fault injection: the proxy delays every
    reply 0.3 s against a 0.1 s timeout), so it books admissions the guard gave up on and
    serves from its ledger. Once Redis answers in time again, it holds exactly what the
    replica admitted, and the replica can spend the whole budget."""
    require_redis()
    proxy = SlowRedisProxy(upstream_port=6379, delay_s=(0.0, 0.0))
    t, other = tenant(100), tenant(100, tenant_id=2)
    with proxy.running() as url:
        guard = GuardedQuotaLimiter(
            RedisQuotaLimiter.from_url(url, key_prefix=redis_prefix),
            mode="local",
            timeout_s=0.1,
            retry_s=0.0,
            window_s=60,
        )
        try:
            # Connections open while Redis is quick (a slow handshake would fail before
            # the call is sent), so the slow calls below reach Redis and run there.
            await asyncio.gather(*(guard.store.admit(other) for _ in range(6)))
            proxy.delay_s = (0.3, 0.3)
            slow = [await guard.admit(t, reserve=20.0) for _ in range(3)]
            assert all(v.allowed and v.reservation is not None for v in slow)
            assert guard.failures >= 3
            await asyncio.sleep(0.5)  # every late call has run at Redis
            proxy.delay_s = (0.0, 0.0)
            failures = guard.failures
            fast = [await guard.admit(t, reserve=20.0) for _ in range(3)]
            assert guard.failures == failures
            # Orphaned bookings cancelled, the ledger's 60 charged once: then two more
            # admissions fill the budget (before, the orphans made Redis refuse at once).
            assert [v.allowed for v in fast] == [True, True, False]
            assert await window_total(redis_prefix, t) == pytest.approx(100.0)
        finally:
            await guard.store.aclose()
