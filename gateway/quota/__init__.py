"""Per-tenant budgets in weighted tokens per minute."""

from gateway.quota.factory import make_quota_limiter
from gateway.quota.limiter import QuotaLimiter, QuotaVerdict, weighted_cost

__all__ = ["QuotaLimiter", "QuotaVerdict", "make_quota_limiter", "weighted_cost"]
