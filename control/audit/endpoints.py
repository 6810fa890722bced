"""/admin/v1/audit: the audit trail, filtered, newest first, cursor-paginated."""

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Query
from pydantic import AwareDatetime, BaseModel, ConfigDict

from control.api.auth import Reader
from control.api.deps import SessionDep
from control.api.errors import error_responses
from control.api.pagination import Cursor, Limit, Page, page_of
from control.audit.repository import AuditFilter, list_events

router = APIRouter(prefix="/audit", tags=["audit"])


class AuditEvent(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    actor: str
    action: str
    entity_type: str
    entity_id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    reason: str | None
    created_at: datetime


@router.get("", response_model=Page[AuditEvent], responses=error_responses())
def list_audit_events(
    session: SessionDep,
    _: Reader,
    actor: str | None = Query(default=None, max_length=200),
    action: str | None = Query(default=None, max_length=100),
    entity_type: str | None = Query(default=None, max_length=50),
    entity_id: str | None = Query(default=None, max_length=100),
    since: AwareDatetime | None = Query(
        default=None, description="Inclusive; needs a timezone (a naive time is 422)."
    ),
    until: AwareDatetime | None = Query(
        default=None, description="Exclusive; needs a timezone (a naive time is 422)."
    ),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[AuditEvent]:
    rows = list_events(
        session,
        AuditFilter(
            actor,
            action,
            entity_type,
            entity_id,
            _in_utc(since) if since is not None else None,
            _in_utc(until) if until is not None else None,
        ),
        cursor=cursor,
        limit=limit,
    )
    return page_of(rows, limit, AuditEvent.model_validate)


def _in_utc(moment: datetime) -> datetime:
    """`moment` in UTC; times at the calendar's ends whose UTC equivalent falls outside
    it (0001-01-01T00:00+14:00) clamp to the first or last representable instant,
    which compares with every stored row exactly as the original would."""
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        edge = datetime.min if moment.year == datetime.min.year else datetime.max
        return edge.replace(tzinfo=UTC)
