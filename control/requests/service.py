"""Storing the records a telemetry batch carries; reading them back; retention."""

import logging
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from control.clock import as_utc
from control.db import Database
from control.errors import NotFound
from control.models import RequestRecordRow
from control.requests import repository as repo
from specwire import RequestRecordDoc

log = logging.getLogger(__name__)

# Rows deleted per transaction by the retention job: short transactions, no long locks.
PURGE_BATCH = 5000


class RequestRecordNotFound(NotFound):
    code = "request_not_found"


def row_values(gateway_id: str, doc: RequestRecordDoc) -> dict[str, Any]:
    values = doc.model_dump(exclude={"sampling", "arm", "received_at"})
    return values | {
        "gateway_id": gateway_id,
        "received_at": as_utc(doc.received_at),
        "arm": doc.arm.value if doc.arm is not None else None,
        "sampling": doc.sampling.model_dump(),
    }


def store_records(session: Session, gateway_id: str, docs: list[RequestRecordDoc]) -> int:
    """Insert a batch's records. Called only for a first delivery of the batch (its
    claim is the idempotency key), so a replay stores nothing twice."""
    if not docs:
        return 0
    return repo.insert_records(session, [row_values(gateway_id, d) for d in docs])


def get_request(session: Session, request_id: str) -> tuple[RequestRecordRow, int]:
    """The newest record for this id and how many records share it."""
    rows = repo.records_by_request_id(session, request_id)
    if not rows:
        raise RequestRecordNotFound(
            f"no record of request {request_id!r} (not sampled, not yet flushed, "
            "or past retention)",
            details={"param": "request_id"},
        )
    return rows[0], len(rows)


def purge_expired(
    database: Database, *, retention: timedelta, now: datetime, batch: int = PURGE_BATCH
) -> int:
    """Delete records received before now - retention, one short transaction per batch."""
    cutoff = now - retention
    total = 0
    while True:
        with database.session() as session:
            deleted = repo.delete_received_before(session, cutoff, batch=batch)
        total += deleted
        if deleted < batch:
            break
    if total:
        log.info("request records: purged %d received before %s", total, cutoff.isoformat())
    return total
