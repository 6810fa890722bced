"""Everything the request path shares, built once per app by create_app."""

import asyncio
from dataclasses import dataclass, field

import httpx

from gateway.auth_guard import AuthGuard
from gateway.metrics import GatewayMetrics
from gateway.proxy.copies import CopyDeps
from gateway.proxy.engine_http import EngineClient
from gateway.proxy.intake import BodyDeadlines
from gateway.proxy.pair_check import PairChecks
from gateway.proxy.shadow import ShadowMirrors
from gateway.quota.limiter import QuotaLimiter
from gateway.routing.balancer import Balancer
from gateway.routing.depth import DepthRouter
from gateway.settings import GatewaySettings
from gateway.snapshot.store import SnapshotStore
from gateway.telemetry.aggregator import TelemetryAggregator


@dataclass(slots=True)
class RequestSlots:
    """The completion requests this process serves at once, against its limit.

    NOTE: a plain integer, no lock: one event loop per process touches it, and only
    between awaits (gateway.routes.fastlane takes and returns the slots)."""

    limit: int
    in_flight: int = 0


@dataclass
class GatewayState:
    settings: GatewaySettings
    store: SnapshotStore
    balancer: Balancer
    metrics: GatewayMetrics
    aggregator: TelemetryAggregator
    quota: QuotaLimiter
    # Control traffic (snapshot, telemetry): low rate, short timeouts.
    control_client: httpx.AsyncClient
    # Failed API keys, counted and rate-limited per source address.
    auth_guard: AuthGuard
    # Engine traffic, the hot path: a lean HTTP/1.1 client (gateway.proxy.engine_http).
    # Its connections belong to the serving event loop, so the lifespan opens it.
    engine_client: EngineClient | None = None
    background: set[asyncio.Task[None]] = field(default_factory=set)
    shadow: ShadowMirrors = field(init=False)
    pair_checks: PairChecks = field(init=False)
    # Depth by load: each rollout's depth-ladder rung, on the balancer's counts.
    depth: DepthRouter = field(init=False)
    # The deadline on receiving request bodies (request_body_timeout_s).
    body_deadlines: BodyDeadlines = field(init=False)
    # max_concurrent_requests; None when unlimited (then nothing is counted at all).
    slots: RequestSlots | None = field(init=False)

    def __post_init__(self) -> None:
        # NOTE: one cap and budget for both kinds of background copy: the load bound
        # they put on the engines (each kind counts its own copies in flight).
        copies = CopyDeps(
            max_inflight=self.settings.shadow.max_inflight,
            budget_s=self.settings.shadow.budget_s,
            balancer=self.balancer,
            metrics=self.metrics,
            aggregator=self.aggregator,
            engine=lambda: self.engine,
            background=self.background,
        )
        self.shadow = ShadowMirrors(copies)
        self.pair_checks = PairChecks(copies)
        self.body_deadlines = BodyDeadlines(self.settings.request_body_timeout_s)
        limit = self.settings.max_concurrent_requests
        self.slots = RequestSlots(limit) if limit else None
        metrics = self.metrics
        self.depth = DepthRouter(
            self.balancer,
            on_change=lambda c: metrics.observe_depth_rung(c.segment, c.to_k, c.reason),
        )

    @property
    def engine(self) -> EngineClient:
        assert self.engine_client is not None, "the app lifespan has not started"
        return self.engine_client
