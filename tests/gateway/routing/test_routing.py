"""Least-outstanding choice and the per-worker circuit breaker."""

from gateway.routing.balancer import Balancer
from gateway.routing.breaker import BreakerState, CircuitBreaker
from specwire import PoolSnapshot, WorkerSpec


class FakeClock:
    """A controllable clock: the breaker's cool-down is time, not a fault to mock."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _state(br: CircuitBreaker) -> BreakerState:
    # A call, not the property, so the type checker does not pin the state between steps.
    return br.state


def _pool(n: int, unhealthy: tuple[int, ...] = ()) -> PoolSnapshot:
    return PoolSnapshot(
        id=1,
        name="p",
        served_model_name="m",
        target_ref="t",
        workers=[
            WorkerSpec(
                id=f"w{i}", pool_id=1, endpoint_url=f"http://h{i}", healthy=i not in unhealthy
            )
            for i in range(n)
        ],
    )


def test_breaker_opens_after_threshold_then_allows_one_half_open_trial() -> None:
    clock = FakeClock()
    br = CircuitBreaker(threshold=3, cooldown_s=5.0, clock=clock)
    br.record_failure()
    br.record_failure()
    assert _state(br) is BreakerState.CLOSED and br.allows()
    br.record_failure()
    assert _state(br) is BreakerState.OPEN and not br.allows()
    clock.now += 5.0
    assert _state(br) is BreakerState.HALF_OPEN and br.allows()
    br.dispatched()
    assert not br.allows()  # one trial at a time
    br.record_failure()
    assert _state(br) is BreakerState.OPEN  # a failed trial re-opens at once
    clock.now += 5.0
    br.dispatched()
    br.record_success()
    assert _state(br) is BreakerState.CLOSED and br.allows()


def test_success_resets_the_consecutive_failure_count() -> None:
    br = CircuitBreaker(threshold=2, cooldown_s=1.0)
    br.record_failure()
    br.record_success()
    br.record_failure()
    assert _state(br) is BreakerState.CLOSED


def test_least_outstanding_spreads_and_skips_unhealthy_and_open_workers() -> None:
    seen: list[tuple[str, str, int]] = []
    bal = Balancer(
        breaker_threshold=1, breaker_cooldown_s=60.0, on_outstanding=lambda *a: seen.append(a)
    )
    pool = _pool(3, unhealthy=(2,))
    a = bal.acquire(pool, set())
    b = bal.acquire(pool, set())
    assert a is not None and b is not None
    assert {a.worker.id, b.worker.id} == {"w0", "w1"}
    c = bal.acquire(pool, set())
    assert c is not None and bal.outstanding(c.worker.id) == 2
    same = a if a.worker.id == c.worker.id else b
    c.release()
    c.release()  # idempotent: a double release must not free someone else's slot
    assert bal.outstanding(c.worker.id) == 1
    same.release()
    d = bal.acquire(pool, set())
    assert d is not None and d.worker.id == c.worker.id
    bal.breaker(pool.workers[0]).record_failure()
    bal.breaker(pool.workers[1]).record_failure()
    assert bal.acquire(pool, set()) is None
    assert seen[0] == ("p", a.worker.id, 1)


def test_exclude_moves_to_the_next_worker() -> None:
    bal = Balancer(breaker_threshold=3, breaker_cooldown_s=1.0)
    pool = _pool(2)
    first = bal.acquire(pool, set())
    assert first is not None
    first.release()
    second = bal.acquire(pool, {first.worker.id})
    assert second is not None and second.worker.id != first.worker.id
    assert bal.acquire(pool, {"w0", "w1"}) is None
