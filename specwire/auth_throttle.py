"""Failed authentication, rate-limited per source address (control and gateway).

A probe sent 9,000 wrong tokens at ~500/s and got 9,000 answers. Each source
address now has a token bucket of failures: every failed authentication takes one
token, tokens come back at a steady rate, and while an address's bucket is empty
its requests are refused with 429 and Retry-After before their credential is even
looked at. Successful requests cost nothing.

The table is bounded: an address whose bucket has refilled is dropped (it is the
same as no entry), and past `max_addresses` the least recently failed address goes
first, so a spray of source addresses costs a fixed amount of memory.

NOTE: the address is the TCP peer. Behind a reverse proxy every client shares the
proxy's address; size the burst for that or limit at the proxy.

Stdlib only and kept in the contract package so that both services, which may
share nothing else, use the same rule.
"""

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

# Reasons counted in specroute_{control,gateway}_auth_failures_total.
REASON_MISSING = "missing_token"
REASON_INVALID = "invalid_token"
REASON_RATE_LIMITED = "rate_limited"
AUTH_FAILURE_REASONS = (REASON_MISSING, REASON_INVALID, REASON_RATE_LIMITED)


@dataclass
class _Bucket:
    tokens: float
    updated: float


class AuthFailureLimiter:
    """Per-address token buckets of authentication failures."""

    def __init__(
        self,
        *,
        burst: int,
        refill_per_second: float,
        max_addresses: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        assert burst >= 1 and refill_per_second > 0 and max_addresses >= 1
        self.burst = burst
        self.refill_per_second = refill_per_second
        self.max_addresses = max_addresses
        self.clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def _refilled(self, address: str, now: float) -> _Bucket | None:
        bucket = self._buckets.get(address)
        if bucket is None:
            return None
        bucket.tokens = min(
            self.burst, bucket.tokens + (now - bucket.updated) * self.refill_per_second
        )
        bucket.updated = now
        if bucket.tokens >= self.burst:
            del self._buckets[address]  # full again: the same as never having failed
            return None
        return bucket

    def retry_after(self, address: str) -> int | None:
        """Whole seconds until `address` may try again; None when it may now."""
        bucket = self._refilled(address, self.clock())
        if bucket is None or bucket.tokens >= 1:
            return None
        return max(1, math.ceil((1 - bucket.tokens) / self.refill_per_second))

    def failed(self, address: str) -> None:
        """Counts one failed authentication from `address`."""
        now = self.clock()
        bucket = self._refilled(address, now)
        if bucket is None:
            bucket = _Bucket(tokens=float(self.burst), updated=now)
            self._buckets[address] = bucket
        bucket.tokens = max(0.0, bucket.tokens - 1)
        self._buckets.move_to_end(address)
        while len(self._buckets) > self.max_addresses:
            self._buckets.popitem(last=False)
