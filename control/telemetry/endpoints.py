"""/admin/v1/telemetry: stored windows by id, so every decision can be recomputed.

A decision row names the windows its evidence was computed from (`window_ids`);
this returns exactly those documents, as the gateways sent them.
"""

from datetime import datetime

from fastapi import APIRouter, Query

from control.api.auth import Reader
from control.api.deps import SessionDep
from control.api.errors import error_responses
from control.api.ids import MAX_ID
from control.errors import InvalidRequest
from control.telemetry import repository
from control.telemetry.service import window_fields
from specwire import TelemetryWindow
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
