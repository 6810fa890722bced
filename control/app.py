"""The control-plane ASGI app: admin API at /admin/v1, internal API at /internal/v1.

This module is where the domains' routers meet: `control.api` stays plumbing
(auth, errors, pagination, ETags) that imports no domain.
"""

import logging

from fastapi import APIRouter, Depends, FastAPI

from control.api.body_guard import BodyGuard
from control.api.handlers import install_error_handlers
from control.api.openapi import install_openapi, operation_id
from control.api.query import reject_unknown_query
from control.api.request_gate import ADMIN_PREFIX, RequestGate, install_auth_failures
from control.api.request_id import RequestIdMiddleware
from control.automation.dispatch import GuardDispatch
from control.db import Database
from control.health import router as health_router
from control.observability import install_metrics
from control.settings import ControlSettings, get_settings
from specwire import INTERNAL_PREFIX

log = logging.getLogger("specroute.control")


def admin_router() -> APIRouter:
    """Every admin domain's router under one APIRouter (mounted at /admin/v1)."""
    from control.audit.endpoints import router as audit
    from control.automation.endpoints import router as automation
    from control.decisions.endpoints import router as decisions
    from control.evaluations.endpoints import router as evaluations
    from control.pairs.endpoints import router as pairs
    from control.pools.endpoints import router as pools
    from control.requests.endpoints import adapters_router
    from control.requests.endpoints import router as requests
    from control.rollouts.endpoints import router as rollouts
    from control.segments.endpoints import router as segments
    from control.telemetry.endpoints import router as telemetry
    from control.tenants.endpoints import router as tenants
    from control.thresholds.endpoints import router as thresholds

    # NOTE: every admin route refuses query parameters it does not declare (422).
    gathered = APIRouter(dependencies=[Depends(reject_unknown_query)])
    for router in (
        pairs,
        pools,
        segments,
        thresholds,
        tenants,
        rollouts,
        evaluations,
        decisions,
        telemetry,
        requests,
        adapters_router,
        audit,
        automation,
    ):
        gathered.include_router(router)
    return gathered


def create_app(
    settings: ControlSettings | None = None, database: Database | None = None
) -> FastAPI:
    from control.internal.endpoints import router as internal_router

    # NOTE: refuses to build an app on unset tokens unless dev tokens are on: a
    # well-known default token would otherwise open a production control plane.
    settings = settings or get_settings()
    unset = settings.unset_tokens()
    settings = settings.with_required_tokens()
    if unset:
        log.warning(
            "DEV TOKENS ON: %s unset, using the well-known development tokens; anyone who "
            "can reach this control plane can administer it. Never run this in production.",
            " and ".join(unset),
        )
    database = database or Database(
        settings.resolved_database_url(),
        lock_timeout_ms=settings.database.lock_timeout_ms,
        statement_timeout_ms=settings.database.statement_timeout_ms,
    )
    app = FastAPI(
        # NOTE: a trailing slash is a typed 404, not a 307 to a URL built from what this
        # process sees (http:// behind a TLS-terminating load balancer).
        redirect_slashes=False,
        title="specroute control plane",
        version="1",
        description="Admin REST (pairs, pools, segments, rollouts, ...) and the internal API.",
        generate_unique_id_function=operation_id,
        # NOTE: SPECROUTE_*DOCS_ENABLED=false drops all three (404), e.g. in production.
        docs_url="/docs" if settings.exposure.docs_enabled else None,
        redoc_url="/redoc" if settings.exposure.docs_enabled else None,
        openapi_url="/openapi.json" if settings.exposure.docs_enabled else None,
    )
    app.state.settings = settings
    app.state.database = database
    app.state.guard_dispatch = (
        GuardDispatch(settings) if settings.automation.guard_on_telemetry else None
    )
    install_error_handlers(app)
    app.add_middleware(BodyGuard)
    # Outside BodyGuard: the credential is checked and the size capped before any
    # layer reads the body.
    app.add_middleware(RequestGate)
    # Added last: outermost, so the id is set before any other layer logs.
    app.add_middleware(RequestIdMiddleware)
    if "admin" in settings.api_surfaces:
        app.include_router(admin_router(), prefix=ADMIN_PREFIX)
    if "internal" in settings.api_surfaces:
        app.include_router(internal_router, prefix=INTERNAL_PREFIX)
    install_auth_failures(app, install_metrics(app))
    app.include_router(health_router)
    install_openapi(app)
    return app
