"""The quota interface the request path uses, and the choice of backend.

A tenant's budget is weighted tokens per sliding 60 s window: prompt and
completion tokens each with their weight, plus drafted-but-rejected tokens with
the ``rejected_draft`` weight, so speculation's wasted draft work is charged
only as the snapshot says. Admission happens before a request runs and the
charge after it (its cost is unknown until then): a tenant is admitted while its
window is below the limit, and may overshoot by what its in-flight requests cost.
"""

from dataclasses import dataclass
from typing import Protocol

from control.contract import QuotaWeights, TenantSpec

WINDOW_SECONDS = 60


@dataclass(frozen=True)
class QuotaVerdict:
    allowed: bool
    retry_after_s: float  # 0 when allowed; else seconds until the window is below the limit
    used: float  # weighted tokens in the current window
    limit: float | None  # None: the tenant is unlimited


class QuotaLimiter(Protocol):
    async def admit(self, tenant: TenantSpec) -> QuotaVerdict: ...

    async def charge(
        self,
        tenant: TenantSpec,
        *,
        prompt_tokens: int,
        completion_tokens: int,
        rejected_draft_tokens: int,
        weights: QuotaWeights,
    ) -> None: ...


UNLIMITED = QuotaVerdict(allowed=True, retry_after_s=0.0, used=0.0, limit=None)


def weighted_cost(
    *, prompt_tokens: int, completion_tokens: int, rejected_draft_tokens: int, weights: QuotaWeights
) -> float:
    return (
        prompt_tokens * weights.prompt
        + completion_tokens * weights.completion
        + rejected_draft_tokens * weights.rejected_draft
    )


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


def make_quota_limiter(redis_url: str | None, *, window_s: int = WINDOW_SECONDS) -> QuotaLimiter:
    """Redis-backed (shared by every replica) when a URL is given, in-memory otherwise."""
    if redis_url:
        from gateway.quota.redis_limiter import RedisQuotaLimiter

        return RedisQuotaLimiter.from_url(redis_url, window_s=window_s)
    from gateway.quota.memory import InMemoryQuotaLimiter

    return InMemoryQuotaLimiter(window_s=window_s)
