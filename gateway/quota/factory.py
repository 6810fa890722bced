"""Picks the quota backend from settings. It sits apart from the interface
(`limiter.py`), which the backends import, so nothing imports in a circle."""

from collections.abc import Callable
from typing import Literal

from gateway.quota.limiter import WINDOW_SECONDS, QuotaLimiter


def make_quota_limiter(
    redis_url: str | None,
    *,
    window_s: int = WINDOW_SECONDS,
    failure_mode: Literal["open", "closed", "local"] = "local",
    timeout_s: float = 0.1,
    retry_s: float = 2.0,
    on_failure: Callable[[str], None] | None = None,
) -> QuotaLimiter:
    """Redis-backed (shared by every replica, guarded by the failure mode) when a URL
    is given, in-memory otherwise."""
    if redis_url:
        from gateway.quota.guarded import GuardedQuotaLimiter
        from gateway.quota.redis_limiter import RedisQuotaLimiter

        return GuardedQuotaLimiter(
            RedisQuotaLimiter.from_url(redis_url, window_s=window_s),
            mode=failure_mode,
            timeout_s=timeout_s,
            retry_s=retry_s,
            window_s=window_s,
            on_failure=on_failure,
        )
    from gateway.quota.memory import InMemoryQuotaLimiter

    return InMemoryQuotaLimiter(window_s=window_s)
