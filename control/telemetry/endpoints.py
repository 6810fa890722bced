"""/admin/v1/telemetry: stored windows by id, so every decision can be recomputed, and
draft acceptance over a segment's windows (or the unsegmented ones) in a time range.

A decision row names the windows its evidence was computed from (`window_ids`);
`/windows` returns exactly those documents, as the gateways sent them.
`/acceptance` sums any segment's windows, in a rollout or not
(control.telemetry.acceptance).
"""

from datetime import datetime

from fastapi import APIRouter, Query

from control.api.auth import Reader
from control.api.deps import SessionDep
from control.api.errors import error_responses
from control.api.ids import MAX_ID
from control.clock import now
from control.errors import InvalidRequest
from control.telemetry import acceptance, repository
from control.telemetry.schemas import WindowAcceptance
from control.telemetry.service import window_fields
from specwire import Arm, TelemetryWindow
from specwire.telemetry import STORED

router = APIRouter(prefix="/telemetry", tags=["telemetry"])

MAX_WINDOWS = 1000


class StoredWindow(TelemetryWindow):
    id: int
    source: str
    received_at: datetime


@router.get("/windows", response_model=list[StoredWindow], responses=error_responses(422))
def list_telemetry_windows(
    session: SessionDep,
    _: Reader,
    ids: str = Query(
        max_length=20_000, description=f"Comma-separated window ids, at most {MAX_WINDOWS}."
    ),
) -> list[StoredWindow]:
    wanted = _parse_ids(ids)
    rows = repository.windows_by_ids(session, wanted)
    return [
        StoredWindow.model_validate(
            {"id": row.id, "source": row.source, "received_at": row.received_at}
            | window_fields(row),
            context={STORED: True},
        )
        for row in rows
    ]


@router.get(
    "/acceptance",
    response_model=WindowAcceptance,
    responses=error_responses(404, 422),
    description="Drafted and accepted tokens, acceptance per draft position and per "
    "response-position bucket, summed over the segment's stored windows (every "
    "gateway's) starting in [since, until), or with unsegmented=true over the windows "
    "of requests that matched no segment: at most "
    f"{acceptance.MAX_RANGE.days} days, and the oldest {acceptance.MAX_SUMMED_WINDOWS} "
    "windows (`truncated` says when more matched).",
)
def get_telemetry_acceptance(
    session: SessionDep,
    _: Reader,
    segment_id: int | None = Query(
        default=None,
        ge=1,
        le=MAX_ID,
        description="The segment whose windows to sum; required unless unsegmented=true.",
    ),
    unsegmented: bool = Query(
        default=False,
        description="Sum the windows of requests that matched no segment instead (the "
        "response's segment_id is null); refused together with segment_id.",
    ),
    pool_id: int | None = Query(
        default=None,
        ge=1,
        le=MAX_ID,
        description="Only the windows of this spec pool's pair version (windows carry "
        "the pair version, not the pool; a baseline pool is refused).",
    ),
    pair_version_id: int | None = Query(
        default=None,
        ge=1,
        le=MAX_ID,
        description="Only the windows of this pair version (from every pool serving it); "
        "with pool_id, it must be the pool's pair version.",
    ),
    arm: Arm | None = Query(default=None, description="Only this arm; default: both."),
    since: datetime | None = Query(
        default=None,
        description="Windows starting at or after (UTC); default: an hour before until.",
    ),
    until: datetime | None = Query(
        default=None, description="Windows starting before (UTC); default: now."
    ),
) -> WindowAcceptance:
    # NOTE: the unsegmented windows are asked for by an explicit flag, not by leaving
    # segment_id out or by a reserved id (0): a missing segment_id stays the 422 it
    # always was (a client that forgot it is not silently served other windows),
    # segment_id keeps its one meaning (a segment, ge=1, 404 when unknown), and the
    # query says what it reads. Hence exactly one of the two.
    if unsegmented and segment_id is not None:
        raise InvalidRequest(
            "segment_id and unsegmented=true: give one of them (unsegmented reads the "
            "windows of requests that matched no segment)",
            code="conflicting_params",
            details={"param": "unsegmented", "params": ["segment_id", "unsegmented"]},
        )
    if not unsegmented and segment_id is None:
        raise InvalidRequest(
            "segment_id is required (or unsegmented=true for the windows of requests "
            "that matched no segment)",
            details={"param": "segment_id"},
        )
    start, end = acceptance.time_range(since, until, now())
    return acceptance.window_acceptance(
        session,
        segment_id=segment_id,
        start=start,
        end=end,
        arm=arm,
        pool_id=pool_id,
        pair_version_id=pair_version_id,
    )


def _parse_ids(raw: str) -> list[int]:
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts or len(parts) > MAX_WINDOWS:
        raise InvalidRequest(
            f"ids: between 1 and {MAX_WINDOWS} window ids", details={"param": "ids"}
        )
    try:
        ids = [int(p) for p in parts if p.isascii()]
    except ValueError as exc:
        raise InvalidRequest("ids: integers only", details={"param": "ids"}) from exc
    if len(ids) != len(parts) or not all(1 <= i <= MAX_ID for i in ids):
        raise InvalidRequest(f"ids: integers in [1, {MAX_ID}]", details={"param": "ids"})
    return sorted(set(ids))
