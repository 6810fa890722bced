"""/admin/v1/audit: the audit trail, filtered, newest first, cursor-paginated."""

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict

from control.api.auth import Reader
from control.api.deps import SessionDep
from control.api.errors import error_responses
from control.api.pagination import Cursor, Limit, Page, cursor_id
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
def list_audit(
    session: SessionDep,
    _: Reader,
    actor: str | None = Query(default=None, max_length=200),
    action: str | None = Query(default=None, max_length=100),
    entity_type: str | None = Query(default=None, max_length=50),
    entity_id: str | None = Query(default=None, max_length=100),
    since: datetime | None = Query(default=None, description="Inclusive, timezone-aware."),
    until: datetime | None = Query(default=None, description="Exclusive, timezone-aware."),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[AuditEvent]:
    rows = list_events(
        session,
        AuditFilter(actor, action, entity_type, entity_id, since, until),
        before_id=cursor_id(cursor),
        limit=limit,
    )
    next_cursor = str(rows[-1].id) if len(rows) == limit else None
    return Page[AuditEvent](
        items=[AuditEvent.model_validate(r) for r in rows], next_cursor=next_cursor
    )
