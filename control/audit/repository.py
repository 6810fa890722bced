"""SQL for the audit trail."""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from control.models import AuditEvent
from control.repository import Repository, within

EVENTS = Repository(AuditEvent, "audit_event")


@dataclass(frozen=True)
class AuditFilter:
    actor: str | None = None
    action: str | None = None
    entity_type: str | None = None
    entity_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def list_events(
    session: Session, where: AuditFilter, *, cursor: str | None, limit: int
) -> list[AuditEvent]:
    """Newest first; `since` inclusive, `until` exclusive."""
    return EVENTS.page(
        session,
        *within(AuditEvent.created_at, where.since, where.until),
        cursor=cursor,
        limit=limit,
        newest=True,
        actor=where.actor,
        action=where.action,
        entity_type=where.entity_type,
        entity_id=where.entity_id,
    )
