"""Storing telemetry batches idempotently, and reading windows back for the automation."""

import logging
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from control.clock import as_utc
from control.models import TelemetryWindowRow
from control.requests.service import store_records
from control.stats.windows import WindowTotals, combine_windows
from control.telemetry import repository
from control.telemetry.schemas import PositionAcceptance
from specwire import (
    COUNTER_FIELDS,
    HISTOGRAM_FIELDS,
    MOMENT_FIELDS,
    POSITION_BUCKETS,
    Arm,
    PositionTokens,
    TelemetryAck,
    TelemetryBatch,
    TelemetryWindow,
    WindowCounts,
    add_response_positions,
)
from specwire.telemetry import STORED, UNKNOWN

log = logging.getLogger(__name__)

# NOTE: the unique key cannot hold NULLs (they never collide in SQL), so "no
# segment" and "no pair version" are stored as 0 and mapped back on read.
NONE_ID = 0


def row_values(source: str, window: TelemetryWindow, known_rollouts: set[int]) -> dict[str, Any]:
    """The stored row's columns for one window (the rollout only when it exists here).

    The counters are stored as the contract defines them: each plain count in its own
    column, the histograms and the load slices in `histograms`, the moments in `moments`,
    the response-position buckets in `by_response_position`.
    """
    rollout_id = window.rollout_id if window.rollout_id in known_rollouts else None
    return {
        "source": source,
        "window_start": as_utc(window.window_start),
        "window_seconds": window.window_seconds,
        "segment_id": window.segment_id if window.segment_id is not None else NONE_ID,
        "arm": window.arm.value,
        "pair_version_id": (
            window.pair_version_id if window.pair_version_id is not None else NONE_ID
        ),
        "rollout_id": rollout_id,
        "rollout_key": window.rollout_id if window.rollout_id is not None else NONE_ID,
        **{name: getattr(window, name) for name in COUNTER_FIELDS},
        "accepted_per_position": list(window.accepted_per_position),
        "histograms": {
            **{name: getattr(window, name).model_dump() for name in HISTOGRAM_FIELDS},
            "by_load": [s.model_dump() for s in window.by_load],
        },
        "moments": {
            **{name: getattr(window, name).model_dump() for name in MOMENT_FIELDS},
            "output_contract": window.output_contract.model_dump(),
        },
        "by_response_position": {
            bucket: tokens.model_dump() for bucket, tokens in window.by_response_position.items()
        },
    }


def ingest_batch(session: Session, batch: TelemetryBatch) -> TelemetryAck:
    """Store a batch once. A replay of (gateway_id, window_start) stores nothing; within a
    new batch, a window whose key is already stored counts as a duplicate."""
    total = len(batch.windows)
    if not repository.claim_batch(session, batch.gateway_id, as_utc(batch.window_start), total):
        # NOTE: the claim covers the batch's request records too: a replay stores none.
        return TelemetryAck(stored=0, duplicates=total)
    wanted = {w.rollout_id for w in batch.windows if w.rollout_id is not None}
    known = repository.existing_rollout_ids(session, wanted)
    if wanted - known:
        # NOTE: a rollout deleted after the gateway's snapshot must not make the whole
        # batch fail (the gateway would drop it); the window still counts for its segment.
        log.warning("telemetry names unknown rollouts %s; stored without", sorted(wanted - known))
    stored = repository.insert_windows(
        session, [row_values(batch.gateway_id, w, known) for w in batch.windows]
    )
    records = store_records(session, batch.gateway_id, batch.requests)
    if batch.requests_dropped:
        log.warning(
            "gateway %s dropped %d request records of window %s (over its per-window cap)",
            batch.gateway_id,
            batch.requests_dropped,
            batch.window_start.isoformat(),
        )
    return TelemetryAck(stored=stored, duplicates=total - stored, requests_stored=records)


def window_fields(row: TelemetryWindowRow) -> dict[str, Any]:
    """The stored row as the fields of its `TelemetryWindow`, unvalidated."""
    histograms = row.histograms or {}
    moments = row.moments or {}
    return {
        "segment_id": row.segment_id if row.segment_id != NONE_ID else None,
        "arm": Arm(row.arm),
        "pair_version_id": row.pair_version_id if row.pair_version_id != NONE_ID else None,
        "rollout_id": row.rollout_id,
        "window_start": row.window_start,
        "window_seconds": row.window_seconds,
        **{name: getattr(row, name) for name in COUNTER_FIELDS},
        "accepted_per_position": list(row.accepted_per_position or []),
        **{name: histograms.get(name, {}) for name in HISTOGRAM_FIELDS},
        "by_load": histograms.get("by_load", []),
        # NOTE: a histogram or moment added after a row was stored reads as empty (zeros).
        **{name: moments.get(name, {}) for name in MOMENT_FIELDS},
        "output_contract": moments.get("output_contract", {}),
        "by_response_position": row.by_response_position or {},
    }


def window_from_row(row: TelemetryWindowRow) -> TelemetryWindow:
    # NOTE: STORED: a row stored before ingestion refused accepted > drafted still reads.
    return TelemetryWindow.model_validate(window_fields(row), context={STORED: True})


def list_windows(
    session: Session,
    *,
    start: datetime,
    end: datetime,
    rollout_id: int | None = None,
    segment_id: int | None = None,
    arm: Arm | None = None,
    pair_version_id: int | None = None,
) -> list[TelemetryWindow]:
    """Windows (from every gateway) starting in [start, end), oldest first."""
    stmt = repository.select_windows(
        start=as_utc(start),
        end=as_utc(end),
        rollout_id=rollout_id,
        segment_id=segment_id,
        arm=arm.value if arm is not None else None,
        pair_version_id=pair_version_id,
    )
    return [window_from_row(row) for row in session.scalars(stmt)]


def window_totals(
    session: Session,
    *,
    start: datetime,
    end: datetime,
    rollout_id: int | None = None,
    segment_id: int | None = None,
    arm: Arm | None = None,
    pair_version_id: int | None = None,
) -> WindowTotals:
    """Counters and histograms (bucket-wise) summed over the matching windows."""
    return combine_windows(
        list_windows(
            session,
            start=start,
            end=end,
            rollout_id=rollout_id,
            segment_id=segment_id,
            arm=arm,
            pair_version_id=pair_version_id,
        )
    )


def acceptance_by_response_position(windows: Iterable[WindowCounts]) -> list[PositionAcceptance]:
    """Drafted and accepted tokens per response-position bucket, summed over `windows`,
    every bucket in POSITION_BUCKETS order. The tokens a window's buckets leave out (a
    window from a gateway that sent none) count in UNKNOWN, so the buckets add up to the
    windows' drafted_tokens and accepted_tokens."""
    summed = add_response_positions(_with_remainder(windows))
    empty = PositionTokens.model_construct(drafted_tokens=0, accepted_tokens=0)
    return [
        PositionAcceptance(
            bucket=bucket,
            drafted_tokens=(tokens := summed.get(bucket, empty)).drafted_tokens,
            accepted_tokens=tokens.accepted_tokens,
            acceptance_rate=(
                tokens.accepted_tokens / tokens.drafted_tokens if tokens.drafted_tokens else None
            ),
        )
        for bucket in POSITION_BUCKETS
    ]


def _with_remainder(windows: Iterable[WindowCounts]) -> Iterator[dict[str, PositionTokens]]:
    """Each window's buckets, then what they leave out of its drafted and accepted
    tokens as UNKNOWN (at least 0: buckets over a window's totals take nothing off)."""
    for window in windows:
        buckets = window.by_response_position
        yield buckets
        drafted = window.drafted_tokens - sum(t.drafted_tokens for t in buckets.values())
        accepted = window.accepted_tokens - sum(t.accepted_tokens for t in buckets.values())
        yield {
            UNKNOWN: PositionTokens.model_construct(
                drafted_tokens=max(drafted, 0), accepted_tokens=max(accepted, 0)
            )
        }


def response_positions_of(session: Session, window_ids: Sequence[int]) -> list[PositionAcceptance]:
    """`acceptance_by_response_position` of the stored windows `window_ids`."""
    rows = repository.windows_by_ids(session, window_ids) if window_ids else []
    return acceptance_by_response_position(window_from_row(row) for row in rows)
