"""SQL for request records: bulk insert, look-up by request id, filtered listing, purge."""

from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from control.models import RequestRecordRow
from control.repository import Repository, within

# NOTE: keeps one multi-row INSERT far below PostgreSQL's 65535 bind parameters
# (37 columns a row).
_ROWS_PER_INSERT = 500

RECORDS = Repository(RequestRecordRow, "request_record")


def insert_records(session: Session, rows: list[dict[str, Any]]) -> int:
    for first in range(0, len(rows), _ROWS_PER_INSERT):
        session.execute(insert(RequestRecordRow), rows[first : first + _ROWS_PER_INSERT])
    return len(rows)


def records_by_request_id(session: Session, request_id: str) -> list[RequestRecordRow]:
    """Every record carrying this id, newest first (a client may reuse an x-request-id)."""
    return list(
        session.scalars(
            select(RequestRecordRow)
            .where(RequestRecordRow.request_id == request_id)
            .order_by(RequestRecordRow.received_at.desc(), RequestRecordRow.id.desc())
        )
    )


def list_records(
    session: Session,
    *,
    request_id: str | None,
    tenant_id: int | None,
    tenant: str | None,
    segment_id: int | None,
    adapter: str | None,
    arm: str | None,
    outcome: str | None,
    http_status: int | None,
    since: datetime | None,
    until: datetime | None,
    cursor: str | None,
    limit: int,
) -> list[RequestRecordRow]:
    """Newest first; `since` inclusive, `until` exclusive."""
    return RECORDS.page(
        session,
        *within(RequestRecordRow.received_at, since, until),
        cursor=cursor,
        limit=limit,
        newest=True,
        request_id=request_id,
        tenant_id=tenant_id,
        tenant=tenant,
        segment_id=segment_id,
        adapter=adapter,
        arm=arm,
        outcome=outcome,
        http_status=http_status,
    )


def delete_received_before(session: Session, cutoff: datetime, *, batch: int) -> int:
    """Delete up to `batch` records received before `cutoff`, oldest first; how many went."""
    ids = list(
        session.scalars(
            select(RequestRecordRow.id)
            .where(RequestRecordRow.received_at < cutoff)
            .order_by(RequestRecordRow.id)
            .limit(batch)
        )
    )
    if not ids:
        return 0
    session.execute(delete(RequestRecordRow).where(RequestRecordRow.id.in_(ids)))
    return len(ids)
