"""Everything the request path shares, built once per app by create_app."""

import asyncio
from dataclasses import dataclass, field

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
    # Engine traffic: no read timeout here, the relay enforces first-token and idle gaps.
    engine_client: httpx.AsyncClient
    # Control traffic (snapshot, telemetry): short timeouts, separate pool.
    control_client: httpx.AsyncClient
    background: set[asyncio.Task[None]] = field(default_factory=set)
