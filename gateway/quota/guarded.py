"""What a Redis outage means for quotas: a setting, a bounded wait, a counted failure.

Every call to the shared store runs under `timeout_s`; a failure (error or timeout)
is counted and, for `retry_s`, the store is not tried again, so a hung Redis costs at
most one timeout per interval instead of one per request. While the store is down:

- ``open``: admit every request (the budget is not enforced);
- ``closed``: refuse with 503 ``quota_unavailable`` (the budget is never exceeded,
  but the front door is shut for limited tenants);
- ``local`` (the default): enforce the budget per gateway replica with an in-memory
  limiter that knows what Redis had already admitted, so one replica never admits
  more than the budget in a window and N replicas at most N x budget.

The local limiter is this replica's *ledger*: every admission it makes, shared or
local, is booked there too, and an admission Redis allows is refused (and refunded
in Redis) when the ledger is already at the limit. That closes the two ways a slow
Redis used to let one replica overshoot: a call that timed out after Redis had run
it (the fallback then started from an empty window), and admissions the fallback made
that Redis never heard of (Redis then admitted a second budget once it answered
again). The fallback also counts what other replicas had booked at Redis' last answer
(`used` minus this replica's ledger) until that answer leaves the window, and what it
admitted on its own is charged to Redis before Redis' next admission.

A call that failed may still have run. Each booking carries a token, so before its next
admission for the tenant the guard replays what it could not confirm, once whatever
the first try did (`RedisQuotaLimiter.reconcile`): an admission it gave up on is
cancelled (the request went to the fallback, which charges Redis for it), a charge or
settle that failed is retried. Without that, Redis kept the orphaned bookings and
refused a replica's last requests below the budget.
"""

import asyncio
import contextlib
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar

from redis.exceptions import RedisError

from gateway.quota.limiter import (
    ChargesByCost,
    QuotaVerdict,
    Reservation,
)
from gateway.quota.memory import InMemoryQuotaLimiter
from gateway.quota.redis_limiter import RedisQuotaLimiter, StoreOp
from specwire import TenantSpec

log = logging.getLogger(__name__)

FailureMode = Literal["open", "closed", "local"]
T = TypeVar("T")


class QuotaStoreUnavailable(Exception):
    """The shared quota store is down and the failure mode is ``closed``."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__("the quota store is unavailable")
        self.retry_after_s = retry_after_s


class _StoreDown(Exception):
    """The store was not reached: skipped while down, or the call failed."""


class _StoreFailed(_StoreDown):
    """The call was made and failed or timed out: Redis may have run it."""


@dataclass
class _Outside:
    """Per tenant: what the rest of the fleet had in Redis, and what Redis lacks."""

    others: float = 0.0  # other replicas' tokens in Redis' window at its last answer
    others_until: float = 0.0  # when that answer has left the window (local clock)
    backlog: float = 0.0  # admitted by the local fallback, not yet charged to Redis
    backlog_until: float = 0.0
    unsure: list[tuple[StoreOp, float]] = field(default_factory=list)  # (op, drop after)


class GuardedQuotaLimiter(ChargesByCost):
    def __init__(
        self,
        store: RedisQuotaLimiter,
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
        self._outside: dict[int, _Outside] = {}
        self._tokens = (f"{secrets.token_hex(6)}.{n}" for n in itertools.count())

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
            raise _StoreFailed from exc

    def _outside_of(self, tenant_id: int) -> _Outside:
        return self._outside.setdefault(tenant_id, _Outside())

    async def _push_backlog(self, tenant: TenantSpec) -> None:
        """Charge Redis with what the fallback admitted while Redis was out of reach,
        so the next shared admission sees it. Claimed before the await (concurrent
        admissions push it once); put back when Redis fails again."""
        outside = self._outside_of(tenant.id)
        if outside.backlog <= 0 or self.local.clock() >= outside.backlog_until:
            outside.backlog = 0.0
            return
        backlog, outside.backlog = outside.backlog, 0.0
        await self._charge_shared(tenant, backlog, until=outside.backlog_until)

    def _unsure(self, tenant_id: int, op: StoreOp, until: float | None = None) -> None:
        """Remember a call that failed after it was sent, to replay it idempotently."""
        until = self.local.clock() + self.local.window_s if until is None else until
        self._outside_of(tenant_id).unsure.append((op, until))

    async def _reconcile(self, tenant_id: int) -> None:
        """Replay the calls whose outcome is unknown (claimed before the await; put back
        when Redis fails again: replaying twice is harmless)."""
        outside = self._outside_of(tenant_id)
        if not outside.unsure:
            return
        now = self.local.clock()
        pending = [(op, until) for op, until in outside.unsure if now < until]
        outside.unsure = []
        if not pending:
            return
        try:
            ops = [op for op, _ in pending]
            await self._call("reconcile", lambda: self.store.reconcile(tenant_id, ops))
        except _StoreDown:
            outside.unsure = pending + outside.unsure
            raise

    async def _charge_shared(self, tenant: TenantSpec, cost: float, *, until: float) -> None:
        token = next(self._tokens)
        try:
            await self._call("charge", lambda: self.store.charge_cost(tenant, cost, token=token))
        except _StoreFailed:
            self._unsure(tenant.id, StoreOp("charge", token, amount=cost), until)
            raise
        except _StoreDown:
            outside = self._outside_of(tenant.id)
            outside.backlog += cost
            outside.backlog_until = max(outside.backlog_until, until)
            raise

    async def _settle_shared(self, reservation: Reservation, cost: float) -> None:
        """Settle at Redis; a failure is counted and, for a tokened reservation, retried."""
        try:
            await self._call("settle", lambda: self.store.settle(reservation, cost))
        except _StoreFailed:
            if reservation.token:
                delta = cost - reservation.amount
                op = StoreOp("settle", reservation.token, reservation.second, delta)
                self._unsure(reservation.tenant_id, op)
        except _StoreDown:
            pass  # NOTE: skipped while down: stays booked until it leaves the window

    async def _admit_shared(self, tenant: TenantSpec, reserve: float) -> QuotaVerdict:
        await self._reconcile(tenant.id)
        await self._push_backlog(tenant)
        token = next(self._tokens)
        try:
            verdict = await self._call(
                "admit", lambda: self.store.admit(tenant, reserve, token=token)
            )
        except _StoreFailed:
            if self.mode != "open" and reserve > 0:
                self._unsure(tenant.id, StoreOp("cancel", token))
            raise
        if not verdict.allowed or verdict.limit is None:
            return verdict
        ledger_before = self.local.used(tenant.id)
        outside = self._outside_of(tenant.id)
        outside.others = max(verdict.used - ledger_before, 0.0)
        outside.others_until = self.local.clock() + self.local.window_s
        mirror = await self.local.admit(tenant, reserve)
        if not mirror.allowed:
            # NOTE: Redis has not seen every admission this replica made (a call that
            # timed out, the fallback's own); the ledger has, and it is full. Refund.
            if verdict.reservation is not None:
                await self._settle_shared(verdict.reservation, 0.0)
            return mirror
        if verdict.reservation is None or mirror.reservation is None:
            return verdict
        return replace(
            verdict,
            reservation=replace(verdict.reservation, local_second=mirror.reservation.second),
        )

    async def admit(self, tenant: TenantSpec, reserve: float = 0.0) -> QuotaVerdict:
        if tenant.quota.weighted_tokens_per_minute is None:
            return await self.store.admit(tenant, reserve)
        try:
            return await self._admit_shared(tenant, reserve)
        except _StoreDown:
            pass
        if self.mode == "closed":
            raise QuotaStoreUnavailable(max(self._skip_until - self.clock(), 1.0))
        if self.mode == "open":
            limit = tenant.quota.weighted_tokens_per_minute
            return QuotaVerdict(allowed=True, retry_after_s=0.0, used=0.0, limit=limit)
        outside = self._outside_of(tenant.id)
        now = self.local.clock()
        others = outside.others if now < outside.others_until else 0.0
        verdict = await self.local.admit(tenant, reserve, outside=others)
        if verdict.reservation is None:
            return verdict
        outside.backlog += verdict.reservation.amount
        outside.backlog_until = now + self.local.window_s
        return replace(verdict, reservation=replace(verdict.reservation, origin="local"))

    async def settle(self, reservation: Reservation, cost: float) -> None:
        if reservation.origin == "local":
            await self.local.settle(reservation, cost)
            outside = self._outside_of(reservation.tenant_id)
            # Not below 0: a refund of a reservation already charged to Redis offsets
            # later backlog by exactly what Redis over-counts for it.
            outside.backlog = max(outside.backlog + cost - reservation.amount, 0.0)
            return
        if reservation.local_second is not None:
            await self.local.settle(replace(reservation, second=reservation.local_second), cost)
        await self._settle_shared(reservation, cost)

    async def charge_cost(self, tenant: TenantSpec, cost: float) -> None:
        await self.local.charge_cost(tenant, cost)
        if cost <= 0 or tenant.quota.weighted_tokens_per_minute is None:
            return
        if self.mode != "local":
            with contextlib.suppress(_StoreDown):
                await self._call("charge", lambda: self.store.charge_cost(tenant, cost))
            return
        with contextlib.suppress(_StoreDown):
            until = self.local.clock() + self.local.window_s
            await self._charge_shared(tenant, cost, until=until)
