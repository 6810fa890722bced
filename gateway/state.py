"""Everything the request path shares, built once per app by create_app."""

import asyncio
from dataclasses import dataclass, field

import aiohttp
import httpx

from gateway.metrics import GatewayMetrics
from gateway.quota.limiter import QuotaLimiter
from gateway.routing.balancer import Balancer
from gateway.settings import GatewaySettings
from gateway.snapshot.store import SnapshotStore
from gateway.telemetry.aggregator import TelemetryAggregator


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
    # Engine traffic, the hot path: aiohttp, whose pool and parser cost a fraction of
    # httpx's per request. Bound to the serving event loop, so opened by the lifespan.
    engine_session: aiohttp.ClientSession | None = None
    background: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def engine(self) -> aiohttp.ClientSession:
        assert self.engine_session is not None, "the app lifespan has not started"
        return self.engine_session
