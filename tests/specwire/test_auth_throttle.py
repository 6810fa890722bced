"""The per-address failure buckets (specwire.auth_throttle), on a fake clock."""

from specwire.auth_throttle import AuthFailureLimiter


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_burst_of_failures_then_429_until_one_failure_ages_out() -> None:
    clock = Clock()
    limiter = AuthFailureLimiter(burst=3, refill_per_second=0.5, max_addresses=10, clock=clock)
    for _ in range(3):
        assert limiter.retry_after("a") is None
        limiter.failed("a")
    assert limiter.retry_after("a") == 2  # one token back at 0.5/s
    assert limiter.retry_after("b") is None  # other addresses are untouched
    clock.t = 1.0
    assert limiter.retry_after("a") == 1
    clock.t = 2.0
    assert limiter.retry_after("a") is None
    limiter.failed("a")
    assert limiter.retry_after("a") == 2


def test_a_refilled_address_is_forgotten() -> None:
    clock = Clock()
    limiter = AuthFailureLimiter(burst=2, refill_per_second=1.0, max_addresses=10, clock=clock)
    limiter.failed("a")
    assert len(limiter) == 1
    clock.t = 1.0
    assert limiter.retry_after("a") is None
    assert len(limiter) == 0


def test_the_table_is_bounded_and_drops_the_least_recent_failure() -> None:
    clock = Clock()
    limiter = AuthFailureLimiter(burst=1, refill_per_second=0.001, max_addresses=100, clock=clock)
    for i in range(10_000):
        limiter.failed(f"10.0.{i // 256}.{i % 256}")
    assert len(limiter) == 100
    assert limiter.retry_after("10.0.0.0") is None  # long forgotten
    assert limiter.retry_after("10.0.39.15") is not None  # the last one
