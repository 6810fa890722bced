"""Failed API-key authentication, counted and rate-limited per source address
(the rule is specwire.auth_throttle's, shared with control)."""

from dataclasses import dataclass

from gateway.errors import AuthRateLimited
from gateway.metrics import GatewayMetrics
from gateway.settings import GatewaySettings
from specwire.auth_throttle import REASON_RATE_LIMITED, AuthFailureLimiter


@dataclass
class AuthGuard:
    limiter: AuthFailureLimiter
    metrics: GatewayMetrics

    @classmethod
    def of(cls, settings: GatewaySettings, metrics: GatewayMetrics) -> "AuthGuard":
        limiter = AuthFailureLimiter(
            burst=settings.auth_failure.burst,
            refill_per_second=settings.auth_failure.refill_per_second,
            max_addresses=settings.auth_failure.max_addresses,
        )
        return cls(limiter, metrics)

    def admit(self, address: str) -> None:
        """Raises AuthRateLimited (429) while `address` has failed too often."""
        wait = self.limiter.retry_after(address)
        if wait is not None:
            self.metrics.auth_failures.labels(REASON_RATE_LIMITED).inc()
            raise AuthRateLimited(wait)

    def failed(self, address: str, reason: str) -> None:
        self.limiter.failed(address)
        self.metrics.auth_failures.labels(reason).inc()
