"""SQL for the audit trail."""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import AuditEvent
from control.repository import equal_to


@dataclass(frozen=True)
class AuditFilter:
    actor: str | None = None
    action: str | None = None
    entity_type: str | None = None
    entity_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def list_events(
    session: Session, where: AuditFilter, *, before_id: int | None, limit: int
) -> list[AuditEvent]:
    """Newest first; `since` inclusive, `until` exclusive."""
    # NOTE: limit + 1 rows: the extra one says whether a next page exists
    # (control.api.pagination.page_of drops it).
    query = select(AuditEvent).order_by(AuditEvent.id.desc()).limit(limit + 1)
    query = query.where(
        *equal_to(
            (AuditEvent.actor, where.actor),
            (AuditEvent.action, where.action),
            (AuditEvent.entity_type, where.entity_type),
            (AuditEvent.entity_id, where.entity_id),
        )
    )
    if where.since is not None:
        query = query.where(AuditEvent.created_at >= where.since)
    if where.until is not None:
        query = query.where(AuditEvent.created_at < where.until)
    if before_id is not None:
        query = query.where(AuditEvent.id < before_id)
    return list(session.scalars(query))
