"""Probes: `/healthz` (the process serves) and `/readyz` (the database answers and
its schema is at the migrations' head).

Liveness never touches the database, so an outage of PostgreSQL takes control
out of its Service (readiness) without Kubernetes restarting healthy processes
(liveness). Readiness answers within `readiness_timeout_s` even when the
database does not: a connect that hangs is a 503, not a probe timeout.
"""

import asyncio
from functools import cache

import anyio.to_thread
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from control.db import Database
from control.migrate import alembic_config

router = APIRouter(tags=["probes"])


@cache
def schema_head() -> str | None:
    """The head revision of the shipped migrations (read once per process)."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def database_revision(database: Database) -> str | None:
    with database.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


@router.get("/healthz", summary="Liveness: the process serves requests")
async def healthz() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get(
    "/readyz",
    summary="Readiness: the database answers and its schema is at head",
    responses={503: {"description": "Not ready; `reason` says why"}},
)
async def readyz(request: Request) -> JSONResponse:
    database: Database = request.app.state.database
    timeout_s: float = request.app.state.settings.readiness_timeout_s
    head = schema_head()
    try:
        revision = await asyncio.wait_for(
            anyio.to_thread.run_sync(database_revision, database), timeout_s
        )
    except TimeoutError:
        return _not_ready(f"the database did not answer within {timeout_s:g} s", head=head)
    except Exception as exc:
        # NOTE: only the error's type: its message may name hosts and users.
        return _not_ready(f"the database is unreachable: {type(exc).__name__}", head=head)
    if revision != head:
        return _not_ready(
            f"the schema is at {revision or 'no revision'}, not at head {head}: "
            "run `specroute control migrate`",
            head=head,
            revision=revision,
        )
    return JSONResponse({"ready": True, "schema_revision": revision})


def _not_ready(reason: str, *, head: str | None, revision: str | None = None) -> JSONResponse:
    body = {"ready": False, "reason": reason, "schema_head": head, "schema_revision": revision}
    return JSONResponse(body, status_code=503)
