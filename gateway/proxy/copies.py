"""What the gateway's background copies of a request share: the shadow's mirrors
and the output contract's paired checks both send requests no client waits for,
under one in-flight cap and time budget each, and record what they measured."""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from gateway.metrics import GatewayMetrics
from gateway.proxy.engine_http import EngineClient
from gateway.proxy.upstream import engine_base
from gateway.routing.balancer import Balancer, Lease
from gateway.telemetry.aggregator import TelemetryAggregator


@dataclass(frozen=True)
class CopyDeps:
    """The collaborators of a background copier (not the whole gateway state)."""

    max_inflight: int
    budget_s: float
    balancer: Balancer
    metrics: GatewayMetrics
    aggregator: TelemetryAggregator
    # The engine client is opened by the app's lifespan, after the copiers are built.
    engine: Callable[[], EngineClient]
    background: set["asyncio.Task[None]"]


class BackgroundCopier:
    """Base of the shadow's mirrors and the paired checks: their collaborators and
    their own count of copies in flight."""

    def __init__(self, deps: CopyDeps) -> None:
        self.max_inflight = deps.max_inflight
        self.budget_s = deps.budget_s
        self.balancer = deps.balancer
        self.metrics = deps.metrics
        self.aggregator = deps.aggregator
        self.engine = deps.engine
        self.background = deps.background
        self.inflight = 0

    async def post_copy(
        self, lease: Lease, path: str, body: bytes, copy_id: str
    ) -> tuple[int, bytes]:
        """POST one copy to the leased worker within the budget: its status and body.

        The worker's breaker hears a 5xx as a failure and anything else as a success
        (a 4xx is the copy's own fault, not the arm's). TimeoutError and EngineHTTPError
        propagate: what they mean is the caller's to record."""
        headers = {"content-type": "application/json", "x-request-id": copy_id}
        async with asyncio.timeout(self.budget_s):
            response = await self.engine().post(
                engine_base(lease.worker.endpoint_url), path, body, headers
            )
            try:
                content = await response.read()
            finally:
                response.close()
        if response.status >= 500:
            lease.breaker.record_failure()
        else:
            lease.breaker.record_success()
        return response.status, content
