"""Per-app state of the internal API: the snapshot cache and the change notifier.

Both hang off the router's lifespan, which FastAPI merges into the app's, so
`create_app` needs no knowledge of them.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

from control.db import Database
from control.settings import ControlSettings
from control.snapshot.notifier import install_snapshot_notifier
from control.snapshot.service import SnapshotService


def snapshot_service(request: Request) -> SnapshotService:
    """The app's snapshot service, created on first use if the lifespan did not run."""
    state = request.app.state
    service = getattr(state, "snapshot_service", None)
    if not isinstance(service, SnapshotService):
        service = SnapshotService.from_settings(state.settings)
        state.snapshot_service = service
    return service


@asynccontextmanager
async def internal_lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: ControlSettings = app.state.settings
    database: Database = app.state.database
    app.state.snapshot_service = SnapshotService.from_settings(settings)
    notifier = install_snapshot_notifier(database, redis_url=settings.redis_url)
    try:
        yield
    finally:
        notifier.close()
