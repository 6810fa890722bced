"""The quota interface the request path uses, and the choice of backend.

A tenant's budget is weighted tokens per sliding 60 s window: prompt and
completion tokens each with their weight, plus drafted-but-rejected tokens with
the ``rejected_draft`` weight, so speculation's wasted draft work is charged
only as the snapshot says.

A tenant is admitted while its window is below the limit, and admission books a
*reservation* at once: an estimate of the request's cost (its prompt bytes / 4
and its max_tokens), in the same atomic step, so concurrent requests see each
other's reservations and cannot overshoot the budget several times over. When the
request ends, `settle` replaces the reservation with what it cost (the engine's
usage, or, when the client left before usage came, the tokens streamed so far).
"""

from dataclasses import dataclass
from typing import Literal, Protocol

from specwire import QuotaWeights, TenantSpec

WINDOW_SECONDS = 60


DEFAULT_COMPLETION_ESTIMATE = 256
"""Completion tokens reserved for a request that names no max_tokens."""
PROMPT_BYTES_PER_TOKEN = 4


@dataclass(frozen=True)
class Reservation:
    """An estimate booked at admission in the window's second `second`."""

    tenant_id: int
    second: int
    amount: float
    origin: Literal["shared", "local"] = "shared"  # local: the per-replica fallback
    local_second: int | None = None  # shared: where this replica's own ledger booked it
    token: str = ""  # shared: names the booking in Redis, so a settle applies once


@dataclass(frozen=True)
class QuotaVerdict:
    allowed: bool
    retry_after_s: float  # 0 when allowed; else seconds until the window is below the limit
    used: float  # weighted tokens in the current window (before this reservation)
    limit: float | None  # None: the tenant is unlimited
    reservation: Reservation | None = None  # booked when allowed with a reserve > 0


class QuotaLimiter(Protocol):
    async def admit(self, tenant: TenantSpec, reserve: float = 0.0) -> QuotaVerdict: ...

    async def settle(self, reservation: Reservation, cost: float) -> None:
        """Replace a reservation by the request's actual weighted cost (refund or top-up)."""
        ...

    async def charge(
        self,
        tenant: TenantSpec,
        *,
        prompt_tokens: int,
        completion_tokens: int,
        rejected_draft_tokens: int,
        weights: QuotaWeights,
    ) -> None: ...

    async def charge_cost(self, tenant: TenantSpec, cost: float) -> None:
        """Add a weighted cost now (a request admitted without a reservation)."""
        ...


UNLIMITED = QuotaVerdict(allowed=True, retry_after_s=0.0, used=0.0, limit=None)


def weighted_cost(
    *, prompt_tokens: int, completion_tokens: int, rejected_draft_tokens: int, weights: QuotaWeights
) -> float:
    return (
        prompt_tokens * weights.prompt
        + completion_tokens * weights.completion
        + rejected_draft_tokens * weights.rejected_draft
    )


def admission_estimate(
    *, prompt_bytes: int, max_tokens: int | None, weights: QuotaWeights
) -> float:
    """What a request may cost before anything is known: its prompt at ~4 bytes per
    token and its completion at max_tokens (or a default)."""
    prompt = -(-prompt_bytes // PROMPT_BYTES_PER_TOKEN)
    completion = max_tokens if max_tokens is not None else DEFAULT_COMPLETION_ESTIMATE
    return prompt * weights.prompt + completion * weights.completion


def chargeable_cost(
    tenant: TenantSpec,
    *,
    prompt_tokens: int,
    completion_tokens: int,
    rejected_draft_tokens: int,
    weights: QuotaWeights,
) -> float | None:
    """The weighted cost to charge, or None when there is nothing to count (an
    unlimited tenant or a free request)."""
    if tenant.quota.weighted_tokens_per_minute is None:
        return None
    cost = weighted_cost(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        rejected_draft_tokens=rejected_draft_tokens,
        weights=weights,
    )
    return cost if cost > 0 else None


class ChargesByCost:
    """`charge` in weighted tokens, for every limiter that implements `charge_cost`."""

    async def charge_cost(self, tenant: TenantSpec, cost: float) -> None:
        raise NotImplementedError

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
        if cost is not None:
            await self.charge_cost(tenant, cost)
