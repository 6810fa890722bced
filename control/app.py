"""The control-plane ASGI app: admin API at /admin/v1, internal API at /internal/v1."""

from fastapi import FastAPI

from control.api.handlers import install_error_handlers
from control.automation.dispatch import GuardDispatch
from control.contract import INTERNAL_PREFIX
from control.db import Database
from control.observability import install_metrics
from control.settings import ControlSettings, get_settings

ADMIN_PREFIX = "/admin/v1"


def create_app(
    settings: ControlSettings | None = None, database: Database | None = None
) -> FastAPI:
    from control.api.router import admin_router
    from control.internal import router as internal_router

    settings = settings or get_settings()
    database = database or Database(settings.resolved_database_url())
    app = FastAPI(
        title="specroute control plane",
        version="1",
        description="Admin REST (pairs, pools, segments, rollouts, ...) and the internal API.",
    )
    app.state.settings = settings
    app.state.database = database
    app.state.guard_dispatch = GuardDispatch(settings) if settings.guard_on_telemetry else None
    install_error_handlers(app)
    app.include_router(admin_router, prefix=ADMIN_PREFIX)
    app.include_router(internal_router, prefix=INTERNAL_PREFIX)
    install_metrics(app)
    return app
