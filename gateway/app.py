"""The gateway application: create_app(settings) wires state, routes and background tasks."""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import httpx
from fastapi import FastAPI
from starlette.types import ASGIApp

from gateway.auth_guard import AuthGuard
from gateway.cors import GatewayCORS
from gateway.errors import register_error_handlers
from gateway.metrics import GatewayMetrics
from gateway.proxy.engine_http import EngineClient
from gateway.quota.factory import make_quota_limiter
from gateway.routes import openai, ops
from gateway.routes.fastlane import CompletionFastLane
from gateway.routing.balancer import Balancer
from gateway.settings import GatewaySettings
from gateway.snapshot.poller import SnapshotPoller
from gateway.snapshot.store import SnapshotStore
from gateway.state import GatewayState
from gateway.telemetry.aggregator import TelemetryAggregator
from gateway.telemetry.flusher import TelemetryFlusher

log = logging.getLogger(__name__)


def build_state(settings: GatewaySettings) -> GatewayState:
    metrics = GatewayMetrics(
        top_k_segments=settings.exposure.segment_top_k,
        hash_tenants=settings.exposure.tenant_label_hash,
    )
    return GatewayState(
        settings=settings,
        store=SnapshotStore(),
        balancer=Balancer(
            breaker_threshold=settings.breaker.failure_threshold,
            breaker_cooldown_s=settings.breaker.cooldown_s,
            on_outstanding=metrics.set_outstanding,
        ),
        metrics=metrics,
        auth_guard=AuthGuard.of(settings, metrics),
        aggregator=TelemetryAggregator(
            settings.gateway_id,
            settings.telemetry.window_s,
            settings.telemetry.max_pending_windows,
            max_records_per_window=settings.telemetry.max_records_per_window,
            max_refusal_records_per_window=settings.telemetry.max_refusal_records_per_window,
            on_record_dropped=metrics.observe_request_record_dropped,
        ),
        quota=make_quota_limiter(
            settings.redis_url,
            failure_mode=settings.quota.redis_failure,
            timeout_s=settings.quota.redis_timeout_s,
            retry_s=settings.quota.redis_retry_s,
            on_failure=metrics.observe_quota_store_failure,
        ),
        control_client=httpx.AsyncClient(timeout=5.0, trust_env=False),
    )


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    state: GatewayState = app.state.gateway
    settings = state.settings
    token = settings.internal_secret()

    known_workers: set[tuple[str, str]] = set()

    def on_poll(store: SnapshotStore) -> None:
        snapshot = store.snapshot
        if snapshot is None:
            return
        state.metrics.set_snapshot(snapshot.version, store.age_s())
        # Workers that left the snapshot drop their series, so churn cannot grow /metrics.
        current = {(p.name, w.id) for p in snapshot.pools for w in p.workers}
        for pool, worker in known_workers - current:
            with contextlib.suppress(KeyError):
                state.metrics.forget_worker(pool, worker)
        known_workers.clear()
        known_workers.update(current)

    poller = SnapshotPoller(
        state.store,
        client=state.control_client,
        control_url=settings.control_url,
        token=token,
        interval_s=settings.snapshot.poll_s,
        snapshot_file=settings.snapshot.file,
        redis_url=settings.redis_url,
        on_poll=on_poll,
    )
    app.state.poller = poller
    # No total or read timeout here: the relay enforces first-token, idle and total limits.
    state.engine_client = EngineClient(
        connect_timeout_s=settings.upstream.connect_timeout_s,
        unacked_timeout_s=settings.upstream.response_header_timeout_s,
    )
    # One refresh before serving, so a healthy deployment is ready at once.
    await poller.poll_once()
    tasks = [asyncio.create_task(poller.run(), name="snapshot-poller")]
    flusher: TelemetryFlusher | None = None
    telemetry_enabled = settings.telemetry.enabled
    if telemetry_enabled is None:
        telemetry_enabled = settings.snapshot.file is None
    if telemetry_enabled:
        # NOTE: without it (standalone file mode) windows still aggregate, bounded
        # by max_pending_windows, and /metrics still counts every request.
        flusher = TelemetryFlusher(
            state.aggregator,
            state.control_client,
            settings.control_url,
            token,
            settings.telemetry.flush_s,
            metrics=state.metrics,
        )
        tasks.append(asyncio.create_task(flusher.run(), name="telemetry-flusher"))
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if state.background:
            await asyncio.gather(*state.background, return_exceptions=True)
        if flusher is not None:
            with contextlib.suppress(Exception):
                await flusher.flush_all()
        await state.engine.close()
        await state.control_client.aclose()


class GatewayApp(FastAPI):
    """FastAPI with the completion fast lane outermost.

    As a middleware added by add_middleware the lane would sit inside FastAPI's
    ServerErrorMiddleware, whose send wrapper every streamed event would pass
    through; the lane renders its own errors, so it needs none of that layer.
    """

    def build_middleware_stack(self) -> ASGIApp:
        state: GatewayState | None = getattr(self.state, "gateway", None)
        lane: ASGIApp = CompletionFastLane(super().build_middleware_stack(), state)
        if state is None or not state.settings.exposure.cors_origins:
            return lane
        # Outside the lane, so streamed completions and typed errors get the headers too.
        return GatewayCORS(lane, state.settings.exposure.cors_origins, state.metrics)


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    settings = settings or GatewaySettings()
    # NOTE: checked before serving, so a gateway without its token refuses to start
    # instead of failing every snapshot poll.
    settings.internal_secret()
    if settings.dev_tokens and settings.internal_token is None:
        log.warning(
            "DEV TOKENS ON: SPECROUTE_GATEWAY_INTERNAL_TOKEN unset, using the well-known "
            "development token. Never run this in production."
        )
    app = GatewayApp(
        # NOTE: a trailing slash is a typed 404, not a 307 to a URL built from what this
        # process sees (http:// behind a TLS-terminating load balancer).
        redirect_slashes=False,
        title="specroute gateway",
        description="OpenAI-compatible front door with per-segment speculation routing.",
        lifespan=_lifespan,
        # NOTE: SPECROUTE_*DOCS_ENABLED=false drops all three (404), e.g. in production.
        docs_url="/docs" if settings.exposure.docs_enabled else None,
        redoc_url="/redoc" if settings.exposure.docs_enabled else None,
        openapi_url="/openapi.json" if settings.exposure.docs_enabled else None,
    )
    app.state.gateway = build_state(settings)
    register_error_handlers(app)
    app.include_router(openai.router)
    app.include_router(ops.router)
    return app
