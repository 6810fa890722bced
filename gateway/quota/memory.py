"""Single-replica quota: a sliding window of one-second buckets per tenant."""

import math
import threading
import time
from collections import deque
from collections.abc import Callable

from gateway.quota.limiter import (
    UNLIMITED,
    WINDOW_SECONDS,
    ChargesByCost,
    QuotaVerdict,
    Reservation,
)
from specwire import TenantSpec


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

    def adjust(self, second: int, delta: float) -> None:
        """Change a live second's amount by `delta` (never below 0); an expired second
        (the reservation left the window) is not touched."""
        for bucket in self.buckets:
            if bucket[0] == second:
                new = max(bucket[1] + delta, 0.0)
                self.total += new - bucket[1]
                bucket[1] = new
                return

    def retry_after(self, now: float, limit: float, window_s: int) -> float:
        remaining = self.total
        for second, amount in self.buckets:
            remaining -= amount
            if remaining < limit:
                return max(second + window_s - now, 0.0)
        return float(window_s)  # unreachable while total >= limit; a safe answer anyway


class InMemoryQuotaLimiter(ChargesByCost):
    def __init__(
        self, *, window_s: int = WINDOW_SECONDS, clock: Callable[[], float] = time.time
    ) -> None:
        self.window_s = window_s
        self.clock = clock
        self._windows: dict[int, _Window] = {}
        self._lock = threading.Lock()

    async def admit(
        self, tenant: TenantSpec, reserve: float = 0.0, *, outside: float = 0.0
    ) -> QuotaVerdict:
        """`outside`: weighted tokens admitted elsewhere (other replicas) that count
        against the limit too; the guarded limiter's fallback passes what Redis knew."""
        limit = tenant.quota.weighted_tokens_per_minute
        if limit is None:
            return UNLIMITED
        now = self.clock()
        with self._lock:
            window = self._windows.setdefault(tenant.id, _Window())
            window.expire(now, self.window_s)
            used = window.total + outside
            if used < limit:
                reservation = None
                if reserve > 0:
                    window.add(now, reserve)
                    reservation = Reservation(tenant.id, math.floor(now), reserve)
                return QuotaVerdict(
                    allowed=True,
                    retry_after_s=0.0,
                    used=used,
                    limit=limit,
                    reservation=reservation,
                )
            wait = window.retry_after(now, max(limit - outside, 0.0), self.window_s)
        return QuotaVerdict(allowed=False, retry_after_s=wait, used=used, limit=limit)

    def used(self, tenant_id: int) -> float:
        """Weighted tokens in the tenant's current window."""
        now = self.clock()
        with self._lock:
            window = self._windows.get(tenant_id)
            if window is None:
                return 0.0
            window.expire(now, self.window_s)
            return window.total

    async def settle(self, reservation: Reservation, cost: float) -> None:
        now = self.clock()
        with self._lock:
            window = self._windows.get(reservation.tenant_id)
            if window is None:
                return
            window.expire(now, self.window_s)
            window.adjust(reservation.second, cost - reservation.amount)

    async def charge_cost(self, tenant: TenantSpec, cost: float) -> None:
        if cost <= 0 or tenant.quota.weighted_tokens_per_minute is None:
            return
        now = self.clock()
        with self._lock:
            window = self._windows.setdefault(tenant.id, _Window())
            window.expire(now, self.window_s)
            window.add(now, cost)
