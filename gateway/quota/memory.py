"""Single-replica quota: a sliding window of one-second buckets per tenant."""

import math
import threading
import time
from collections import deque
from collections.abc import Callable

from control.contract import QuotaWeights, TenantSpec
from gateway.quota.limiter import UNLIMITED, WINDOW_SECONDS, QuotaVerdict, chargeable_cost


class _Window:
    """Charges per whole second; a second s counts while s > now - window, i.e. until s + window."""

    __slots__ = ("buckets", "total")

    def __init__(self) -> None:
        self.buckets: deque[list[float]] = deque()  # [second, amount], seconds increasing
        self.total = 0.0

    def expire(self, now: float, window_s: int) -> None:
        cutoff = math.floor(now) - window_s
        while self.buckets and self.buckets[0][0] <= cutoff:
            self.total -= self.buckets.popleft()[1]
        if not self.buckets:
            self.total = 0.0  # no float drift accumulates across idle periods

    def add(self, now: float, amount: float) -> None:
        second = float(math.floor(now))
        if self.buckets and self.buckets[-1][0] == second:
            self.buckets[-1][1] += amount
        else:
            self.buckets.append([second, amount])
        self.total += amount

    def retry_after(self, now: float, limit: float, window_s: int) -> float:
        remaining = self.total
        for second, amount in self.buckets:
            remaining -= amount
            if remaining < limit:
                return max(second + window_s - now, 0.0)
        return float(window_s)  # unreachable while total >= limit; a safe answer anyway


class InMemoryQuotaLimiter:
    def __init__(
        self, *, window_s: int = WINDOW_SECONDS, clock: Callable[[], float] = time.time
    ) -> None:
        self.window_s = window_s
        self.clock = clock
        self._windows: dict[int, _Window] = {}
        self._lock = threading.Lock()

    async def admit(self, tenant: TenantSpec) -> QuotaVerdict:
        limit = tenant.quota.weighted_tokens_per_minute
        if limit is None:
            return UNLIMITED
        now = self.clock()
        with self._lock:
            window = self._windows.get(tenant.id)
            if window is None:
                return QuotaVerdict(allowed=True, retry_after_s=0.0, used=0.0, limit=limit)
            window.expire(now, self.window_s)
            used = window.total
            if used < limit:
                return QuotaVerdict(allowed=True, retry_after_s=0.0, used=used, limit=limit)
            wait = window.retry_after(now, limit, self.window_s)
        return QuotaVerdict(allowed=False, retry_after_s=wait, used=used, limit=limit)

    async def charge(
        self,
        tenant: TenantSpec,
        *,
        prompt_tokens: int,
        completion_tokens: int,
        rejected_draft_tokens: int,
        weights: QuotaWeights,
    ) -> None:
        cost = chargeable_cost(
            tenant,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            rejected_draft_tokens=rejected_draft_tokens,
            weights=weights,
        )
        if cost is None:
            return
        now = self.clock()
        with self._lock:
            window = self._windows.setdefault(tenant.id, _Window())
            window.expire(now, self.window_s)
            window.add(now, cost)
