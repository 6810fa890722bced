"""SQL for telemetry: insert-if-absent on both backends, and window reads.

Idempotency rests on unique keys, not on read-then-write checks, so two
concurrent deliveries of one batch cannot both store it: PostgreSQL makes the
second `INSERT .. ON CONFLICT DO NOTHING` wait for the first and then skip,
SQLite serializes writers and `INSERT OR IGNORE` skips.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Insert, Row, Select, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from control.models import Rollout, TelemetryBatchRow, TelemetryWindowRow

WINDOW_KEY = ("source", "window_start", "segment_id", "arm", "pair_version_id", "rollout_key")
# NOTE: keeps one multi-row INSERT far below PostgreSQL's 65535 bind parameters.
_ROWS_PER_INSERT = 500


def _insert_ignoring_conflicts(
    session: Session, table: Any, index_elements: Sequence[str]
) -> Insert:
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=list(index_elements))
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(index_elements))
    raise NotImplementedError(f"telemetry ingestion does not support {dialect}")


def claim_batch(session: Session, gateway_id: str, window_start: datetime, windows: int) -> bool:
    """Insert the batch marker; False when this (gateway, window start) was already stored."""
    stmt = _insert_ignoring_conflicts(
        session, TelemetryBatchRow, ("gateway_id", "window_start")
    ).values(gateway_id=gateway_id, window_start=window_start, windows=windows)
    inserted = session.execute(stmt.returning(TelemetryBatchRow.id)).first()
    return inserted is not None


def insert_windows(session: Session, rows: list[dict[str, Any]]) -> int:
    """Insert window rows, skipping any whose unique key exists; returns how many were new."""
    stored = 0
    for first in range(0, len(rows), _ROWS_PER_INSERT):
        chunk = rows[first : first + _ROWS_PER_INSERT]
        stmt = _insert_ignoring_conflicts(session, TelemetryWindowRow, WINDOW_KEY).values(chunk)
        stored += len(session.execute(stmt.returning(TelemetryWindowRow.id)).all())
    return stored


def existing_rollout_ids(session: Session, ids: set[int]) -> set[int]:
    if not ids:
        return set()
    return set(session.scalars(select(Rollout.id).where(Rollout.id.in_(ids))))


def select_windows(
    *,
    start: datetime,
    end: datetime,
    rollout_id: int | None = None,
    segment_id: int | None = None,
    arm: str | None = None,
    pair_version_id: int | None = None,
) -> Select[TelemetryWindowRow]:
    """Windows starting in [start, end), oldest first; None filters match anything."""
    stmt = select(TelemetryWindowRow).where(
        TelemetryWindowRow.window_start >= start, TelemetryWindowRow.window_start < end
    )
    if rollout_id is not None:
        stmt = stmt.where(TelemetryWindowRow.rollout_id == rollout_id)
    if segment_id is not None:
        stmt = stmt.where(TelemetryWindowRow.segment_id == segment_id)
    if arm is not None:
        stmt = stmt.where(TelemetryWindowRow.arm == arm)
    if pair_version_id is not None:
        stmt = stmt.where(TelemetryWindowRow.pair_version_id == pair_version_id)
    return stmt.order_by(TelemetryWindowRow.window_start, TelemetryWindowRow.id)


# What an acceptance summary reads of a window: no histograms, no moments.
ACCEPTANCE_COLUMNS = (
    TelemetryWindowRow.window_start,
    TelemetryWindowRow.requests,
    TelemetryWindowRow.drafts,
    TelemetryWindowRow.drafted_tokens,
    TelemetryWindowRow.accepted_tokens,
    TelemetryWindowRow.accepted_per_position,
    TelemetryWindowRow.by_response_position,
)


def acceptance_rows(
    session: Session,
    *,
    segment_id: int,
    start: datetime,
    end: datetime,
    arm: str | None,
    pair_version_id: int | None,
    limit: int,
) -> list[Row[Any]]:
    """`ACCEPTANCE_COLUMNS` of a segment's windows starting in [start, end), oldest
    first, at most `limit` (on the (segment_id, window_start) index). `segment_id` is
    the stored key: 0 (service.NONE_ID) reads the windows no segment matched."""
    stmt = select_windows(
        start=start, end=end, segment_id=segment_id, arm=arm, pair_version_id=pair_version_id
    )
    return list(session.execute(stmt.with_only_columns(*ACCEPTANCE_COLUMNS).limit(limit)))


def windows_by_ids(session: Session, ids: Sequence[int]) -> list[TelemetryWindowRow]:
    return list(
        session.scalars(
            select(TelemetryWindowRow)
            .where(TelemetryWindowRow.id.in_(list(ids)))
            .order_by(TelemetryWindowRow.id)
        )
    )
