"""Routes of the internal API (/internal/v1): snapshot, telemetry, heartbeats, pool specs."""

from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Depends, Header, Request, Response

from control.api.deps import SessionDep, SettingsDep
from control.api.errors import error_responses
from control.automation.dispatch import GuardDispatch
from control.internal.auth import (
    Agent,
    Gateway,
    check_agent_beat,
    check_agent_pool,
    not_enrolled,
)
from control.internal.limits import check_batch, check_heartbeat
from control.internal.pool_spec import pool_spec_by_id, pool_spec_by_name
from control.internal.state import internal_lifespan, snapshot_service
from control.snapshot.service import SnapshotService
from control.telemetry.service import ingest_batch
from control.workers.errors import UnknownPool
from control.workers.service import record_heartbeat
from specwire import (
    HeartbeatAck,
    PolicySnapshot,
    PoolSpec,
    TelemetryAck,
    TelemetryBatch,
    WorkerHeartbeat,
)

router = APIRouter(lifespan=internal_lifespan, tags=["internal"])

SnapshotServiceDep = Annotated[SnapshotService, Depends(snapshot_service)]


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 weak comparison against a list of tags or `*`."""
    if if_none_match is None:
        return False
    for candidate in if_none_match.split(","):
        tag = candidate.strip()
        if tag == "*":
            return True
        if tag.startswith("W/"):
            tag = tag[2:]
        if tag == etag:
            return True
    return False


@router.get(
    "/snapshot",
    response_model=PolicySnapshot,
    responses={
        304: {"description": "If-None-Match names the current version."},
        **error_responses(401, 403),
    },
)
def get_snapshot(
    session: SessionDep,
    service: SnapshotServiceDep,
    _: Gateway,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
) -> Response:
    headers = {"Cache-Control": "no-cache"}
    stamp = service.current_stamp(session)
    etag = f'"{stamp[0]}"'
    if etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers | {"ETag": etag})
    compiled = service.compiled_for(session, stamp)
    return Response(
        content=compiled.body,
        media_type="application/json",
        headers=headers | {"ETag": compiled.etag},
    )


@router.post("/telemetry", response_model=TelemetryAck, responses=error_responses(401, 403))
def post_telemetry(
    batch: TelemetryBatch,
    session: SessionDep,
    request: Request,
    background: BackgroundTasks,
    _: Gateway,
) -> TelemetryAck:
    check_batch(batch)
    ack = ingest_batch(session, batch)
    dispatch: GuardDispatch | None = getattr(request.app.state, "guard_dispatch", None)
    rollouts = {w.rollout_id for w in batch.windows if w.rollout_id is not None}
    if ack.stored and rollouts and dispatch is not None:
        # NOTE: background tasks run after the session dependency committed, so the
        # guard reads the windows that justify it.
        background.add_task(dispatch.send, rollouts)
    return ack


@router.post(
    "/workers/{worker_id}/heartbeat",
    response_model=HeartbeatAck,
    responses=error_responses(401, 403, 404),
    description=(
        "Enrolled agents only: the beat's pool must be the one the agent's token was "
        "enrolled for and its endpoint_url at an allowed origin (403 otherwise)."
    ),
)
def post_heartbeat(
    worker_id: str,
    beat: WorkerHeartbeat,
    session: SessionDep,
    settings: SettingsDep,
    agent: Agent,
) -> HeartbeatAck:
    check_heartbeat(worker_id, beat)
    check_agent_beat(agent, beat.pool_id, beat.endpoint_url)
    return record_heartbeat(
        session,
        worker_id,
        beat,
        default_kv_cache_limit=settings.kv_cache_high_usage,
        enrolled_pool_id=agent.pool_id,
    )


@router.get(
    "/pools/{pool_id}/spec", response_model=PoolSpec, responses=error_responses(401, 403, 404)
)
def get_pool_spec(pool_id: int, session: SessionDep, agent: Agent) -> PoolSpec:
    check_agent_pool(agent, pool_id)  # before the lookup: no 404 for other pools
    return pool_spec_by_id(session, pool_id)


@router.get(
    "/pools/by-name/{name}/spec",
    response_model=PoolSpec,
    responses=error_responses(401, 403, 404),
)
def get_pool_spec_by_name(name: str, session: SessionDep, agent: Agent) -> PoolSpec:
    try:
        spec = pool_spec_by_name(session, name)
    except UnknownPool:
        raise not_enrolled(agent) from None  # as for another agent's pool: no oracle
    check_agent_pool(agent, spec.id)
    return spec
