"""What a Redis outage means for quotas: a setting, a bounded wait, a counted failure.

Every call to the shared store runs under `timeout_s`; a failure (error or timeout)
is counted and, for `retry_s`, the store is not tried again, so a hung Redis costs at
most one timeout per interval instead of one per request. While the store is down:

- ``open``: admit every request (the budget is not enforced);
- ``closed``: refuse with 503 ``quota_unavailable`` (the budget is never exceeded,
  but the front door is shut for limited tenants);
- ``local`` (the default): enforce the budget per gateway replica with an in-memory
  limiter, so each replica still caps a tenant (at most replicas x budget).
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Literal, TypeVar

from redis.exceptions import RedisError

from control.contract import TenantSpec
from gateway.quota.limiter import (
    ChargesByCost,
    QuotaLimiter,
    QuotaVerdict,
    Reservation,
)
from gateway.quota.memory import InMemoryQuotaLimiter

log = logging.getLogger(__name__)

FailureMode = Literal["open", "closed", "local"]
T = TypeVar("T")


class QuotaStoreUnavailable(Exception):
    """The shared quota store is down and the failure mode is ``closed``."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__("the quota store is unavailable")
        self.retry_after_s = retry_after_s


class _StoreDown(Exception):
    pass


class GuardedQuotaLimiter(ChargesByCost):
    def __init__(
        self,
        store: QuotaLimiter,
        *,
        mode: FailureMode,
        timeout_s: float,
        retry_s: float,
        window_s: int,
        on_failure: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.mode = mode
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self.local = InMemoryQuotaLimiter(window_s=window_s)
        self.on_failure = on_failure
        self.clock = clock
        self.failures = 0
        self._skip_until = 0.0

    def store_available(self) -> bool:
        return self.clock() >= self._skip_until

    async def _call(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        if not self.store_available():
            raise _StoreDown
        try:
            async with asyncio.timeout(self.timeout_s):
                return await call()
        except (RedisError, OSError, TimeoutError) as exc:
            self.failures += 1
            self._skip_until = self.clock() + self.retry_s
            if self.on_failure is not None:
                self.on_failure(operation)
            log.warning(
                "quota store %s failed (%s); mode %s for %.1f s",
                operation,
                type(exc).__name__,
                self.mode,
                self.retry_s,
            )
            raise _StoreDown from exc

    async def admit(self, tenant: TenantSpec, reserve: float = 0.0) -> QuotaVerdict:
        try:
            return await self._call("admit", lambda: self.store.admit(tenant, reserve))
        except _StoreDown:
            pass
        if self.mode == "closed":
            raise QuotaStoreUnavailable(max(self._skip_until - self.clock(), 1.0))
        if self.mode == "open":
            limit = tenant.quota.weighted_tokens_per_minute
            return QuotaVerdict(allowed=True, retry_after_s=0.0, used=0.0, limit=limit)
        verdict = await self.local.admit(tenant, reserve)
        if verdict.reservation is None:
            return verdict
        return replace(verdict, reservation=replace(verdict.reservation, origin="local"))

    async def settle(self, reservation: Reservation, cost: float) -> None:
        if reservation.origin == "local":
            await self.local.settle(reservation, cost)
            return
        # A failure is counted; the shared reservation stays booked until it leaves the window.
        with contextlib.suppress(_StoreDown):
            await self._call("settle", lambda: self.store.settle(reservation, cost))

    async def charge_cost(self, tenant: TenantSpec, cost: float) -> None:
        try:
            await self._call("charge", lambda: self.store.charge_cost(tenant, cost))
        except _StoreDown:
            if self.mode == "local":
                await self.local.charge_cost(tenant, cost)
