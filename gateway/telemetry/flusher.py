"""Background flush of closed telemetry windows to control's internal API.

Delivery is at-least-once: a batch leaves the queue only after a 2xx, and
control deduplicates by (gateway id, window start), so a retry after a lost
response is harmless. While control is down the queue is capped; the oldest
batches go first (the newest windows matter most to canary evaluation), and
every drop is counted.
"""

import asyncio
import logging
import random
import time
from collections import deque
from typing import TYPE_CHECKING, Literal

import httpx

from gateway.telemetry.aggregator import TelemetryAggregator
from specwire import INTERNAL_PREFIX, TelemetryAck, TelemetryBatch

if TYPE_CHECKING:
    from gateway.metrics import GatewayMetrics

log = logging.getLogger(__name__)

DropReason = Literal["overflow", "rejected", "shutdown"]

# Statuses that say "this batch will never be accepted": retrying would block the queue.
# Everything else (401/403/404 from a misconfigured or half-deployed control included)
# is retried: the queue cap already bounds what waiting costs.
_PERMANENT_REJECTIONS = frozenset({400, 413, 422})


class TelemetryFlusher:
    def __init__(
        self,
        aggregator: TelemetryAggregator,
        client: httpx.AsyncClient,
        control_url: str,
        token: str,
        interval_s: float,
        *,
        max_pending_batches: int | None = None,
        max_backoff_s: float = 30.0,
        request_timeout_s: float = 5.0,
        metrics: "GatewayMetrics | None" = None,
    ) -> None:
        # One setting bounds both queues: while control is down, closed windows move from
        # the aggregator into this queue every interval, so this cap is the one that bites.
        max_pending = max_pending_batches or aggregator.max_pending_windows
        self.aggregator = aggregator
        self.client = client
        self.url = control_url.rstrip("/") + INTERNAL_PREFIX + "/telemetry"
        self.interval_s = interval_s
        self.max_backoff_s = max(max_backoff_s, interval_s)
        self.request_timeout_s = request_timeout_s
        self.metrics = metrics
        self._headers = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        self._pending: deque[TelemetryBatch] = deque()
        self._max_pending = max_pending
        self._send_lock = asyncio.Lock()
        self.consecutive_failures = 0
        self.flushed = 0
        self.partially_stored = 0
        self.dropped: dict[DropReason, int] = {"overflow": 0, "rejected": 0, "shutdown": 0}

    @property
    def pending(self) -> int:
        return len(self._pending)

    def next_delay(self) -> float:
        """Interval while healthy; exponential backoff with jitter after failures."""
        if self.consecutive_failures == 0:
            return self.interval_s
        ceiling = min(self.interval_s * 2.0**self.consecutive_failures, self.max_backoff_s)
        # NOTE: jitter keeps a fleet of gateways from retrying in lockstep after an outage.
        return random.uniform(ceiling / 2.0, ceiling)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.next_delay())
            try:
                self.collect(time.time())
                await self.send_pending()
            except asyncio.CancelledError:
                raise
            except Exception:  # a defect here must not kill telemetry for the process
                log.exception("telemetry flush round failed")
                self.consecutive_failures += 1

    def collect(self, now: float) -> int:
        """Move closed windows from the aggregator into the bounded send queue."""
        batches = self.aggregator.drain_closed(now)
        for batch in batches:
            self._enqueue(batch)
        return len(batches)

    def _enqueue(self, batch: TelemetryBatch) -> None:
        if len(self._pending) >= self._max_pending:
            self._pending.popleft()
            self._drop("overflow")
        self._pending.append(batch)
        if self.metrics is not None:
            self.metrics.set_telemetry_pending(len(self._pending))

    def _drop(self, reason: DropReason, n: int = 1) -> None:
        self.dropped[reason] += n
        if self.metrics is not None:
            self.metrics.observe_telemetry_dropped(reason, n)

    async def send_pending(self) -> bool:
        """Send queued batches oldest first; False when control is unreachable or failing."""
        async with self._send_lock:
            while self._pending:
                batch = self._pending[0]
                verdict = await self._post(batch)
                if verdict == "retry":
                    self.consecutive_failures += 1
                    return False
                self._pending.popleft()
                if verdict == "ok":
                    self.flushed += 1
                    if self.metrics is not None:
                        self.metrics.observe_telemetry_flushed()
                else:
                    self._drop("rejected")
                if self.metrics is not None:
                    self.metrics.set_telemetry_pending(len(self._pending))
            self.consecutive_failures = 0
            return True

    async def _post(self, batch: TelemetryBatch) -> Literal["ok", "retry", "rejected"]:
        try:
            resp = await self.client.post(
                self.url,
                content=batch.model_dump_json(),
                headers=self._headers,
                timeout=self.request_timeout_s,
            )
        except httpx.HTTPError as exc:
            log.warning("telemetry flush to %s failed: %s", self.url, type(exc).__name__)
            return "retry"
        if resp.is_success:
            try:
                ack = TelemetryAck.model_validate_json(resp.content)
            except ValueError:
                # Control took the batch (2xx); a malformed ack is its defect, not a reason
                # to resend and count the window twice.
                log.warning("control acked telemetry with an unreadable body")
                return "ok"
            if ack.stored and ack.duplicates:
                # A first delivery that is partly "duplicate" means control keyed two of
                # our windows alike (e.g. same segment/arm/pair, different rollout): counts
                # were lost there, and only this log says so.
                log.warning(
                    "control stored %d of %d windows of batch %s; %d collided",
                    ack.stored,
                    len(batch.windows),
                    batch.window_start.isoformat(),
                    ack.duplicates,
                )
                self.partially_stored += 1
            return "ok"
        if resp.status_code in _PERMANENT_REJECTIONS:
            log.error(
                "control rejected telemetry window %s with %d; dropping it",
                batch.window_start.isoformat(),
                resp.status_code,
            )
            return "rejected"
        log.warning("telemetry flush got %d from control; will retry", resp.status_code)
        return "retry"

    async def flush_all(self, deadline_s: float = 5.0) -> None:
        """On shutdown: drain every window (open ones too) and try to deliver within a deadline."""
        for batch in self.aggregator.drain_all():
            self._enqueue(batch)
        give_up_at = time.monotonic() + deadline_s
        attempt = 0
        while self._pending:
            try:
                async with asyncio.timeout(max(give_up_at - time.monotonic(), 0.0)):
                    if await self.send_pending():
                        return
                    attempt += 1
                    await asyncio.sleep(min(0.1 * 2.0**attempt, 1.0))
            except TimeoutError:
                break
        if self._pending:
            log.error("telemetry: %d batches undelivered at shutdown", len(self._pending))
            self._drop("shutdown", len(self._pending))
            self._pending.clear()
