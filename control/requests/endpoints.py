"""/admin/v1/requests: one request's whole story by its id, and a filtered listing.

Records hold ids, the decision and its reason, sampling settings, token counts,
acceptance and latency; never prompt or completion text.
"""

from datetime import datetime, timedelta

from fastapi import APIRouter, Path, Query, Response

from control.api.auth import Reader
from control.api.deps import SessionDep
from control.api.errors import error_responses
from control.api.ids import MAX_ID
from control.api.pagination import Cursor, Limit, Page, page_of
from control.clock import as_utc, now
from control.models import RequestRecordRow
from control.requests import repository as repo
from control.requests.acceptance import acceptance_by_adapter
from control.requests.schemas import AdapterAcceptanceList, AdapterAcceptanceOut, RequestRecord
from control.requests.service import get_request as newest_record
from specwire import Arm
from specwire.draft_bounds import STORED
from specwire.requests import Outcome

router = APIRouter(prefix="/requests", tags=["requests"])
adapters_router = APIRouter(prefix="/adapters", tags=["adapters"])

# The window acceptance per adapter covers when no `since` is given.
DEFAULT_ACCEPTANCE_WINDOW = timedelta(hours=1)

# The gateway's request-id alphabet (x-request-id it accepts, or hex it makes).
RequestIdPath = Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")


def stored_record(row: RequestRecordRow) -> RequestRecord:
    # NOTE: STORED: a row stored before ingestion refused accepted > drafted still reads.
    return RequestRecord.model_validate(row, context={STORED: True})


@router.get("", response_model=Page[RequestRecord], responses=error_responses())
def list_requests(
    session: SessionDep,
    _: Reader,
    request_id: str | None = Query(
        default=None, min_length=1, max_length=128, description="Every record with this id."
    ),
    tenant_id: int | None = Query(default=None, ge=1, le=MAX_ID),
    tenant: str | None = Query(default=None, max_length=100, description="Tenant name."),
    segment_id: int | None = Query(default=None, ge=1, le=MAX_ID),
    adapter: str | None = Query(default=None, max_length=256, description="LoRA adapter."),
    arm: Arm | None = None,
    outcome: Outcome | None = Query(
        default=None, description="ok, error (an arm error), client_error (a 4xx) or cancelled."
    ),
    status: int | None = Query(default=None, ge=100, le=599, description="HTTP status."),
    since: datetime | None = Query(default=None, description="Received at or after (UTC)."),
    until: datetime | None = Query(default=None, description="Received before (UTC)."),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[RequestRecord]:
    rows = repo.list_records(
        session,
        request_id=request_id,
        tenant_id=tenant_id,
        tenant=tenant,
        segment_id=segment_id,
        adapter=adapter,
        arm=arm.value if arm is not None else None,
        outcome=outcome,
        http_status=status,
        since=as_utc(since) if since is not None else None,
        until=as_utc(until) if until is not None else None,
        cursor=cursor,
        limit=limit,
    )
    return page_of(rows, limit, stored_record)


@router.get(
    "/{request_id}",
    response_model=RequestRecord,
    responses={
        200: {
            "headers": {
                "X-Records-With-Id": {
                    "description": "Records sharing this id.",
                    "schema": {"type": "integer"},
                }
            }
        },
        **error_responses(404),
    },
)
def get_request(
    session: SessionDep,
    _: Reader,
    response: Response,
    request_id: str = RequestIdPath,
) -> RequestRecord:
    """The newest record with this id (a client may reuse an x-request-id; the listing
    filters show all of them)."""
    row, count = newest_record(session, request_id)
    response.headers["X-Records-With-Id"] = str(count)
    return stored_record(row)


@adapters_router.get(
    "/acceptance", response_model=AdapterAcceptanceList, responses=error_responses()
)
def get_adapter_acceptance(
    session: SessionDep,
    _: Reader,
    adapter: str | None = Query(default=None, max_length=256, description="Only this adapter."),
    segment_id: int | None = Query(default=None, ge=1, le=MAX_ID),
    tenant: str | None = Query(default=None, max_length=100, description="Tenant name."),
    since: datetime | None = Query(
        default=None, description="Received at or after (UTC); default: one hour ago."
    ),
    until: datetime | None = Query(default=None, description="Received before (UTC)."),
) -> AdapterAcceptanceList:
    """Measured acceptance per LoRA adapter and pair version (the base model as adapter
    null), from the request records: what an adapter's traffic actually yields."""
    start = as_utc(since) if since is not None else now() - DEFAULT_ACCEPTANCE_WINDOW
    end = as_utc(until) if until is not None else None
    entries = acceptance_by_adapter(
        session, since=start, until=end, adapter=adapter, segment_id=segment_id, tenant=tenant
    )
    return AdapterAcceptanceList(
        since=start,
        until=end,
        items=[AdapterAcceptanceOut.model_validate(e) for e in entries],
    )
