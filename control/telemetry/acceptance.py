"""Draft acceptance over one segment's stored windows in a time range, outside any
rollout (`GET /admin/v1/telemetry/acceptance`); or over the windows of requests that
matched no segment (stored with segment 0, `NONE_ID`).

Windows carry (segment, arm, pair version, rollout), not the pool that served them, so
a pool selects the windows of its pair version (from every pool serving it, and the
baseline arm of rollouts comparing against it); a baseline pool has none to select.
`pair_version_id` selects the same windows by the version itself; given with a pool,
the two must name the same version.
"""

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row
from sqlalchemy.orm import Session

from control.clock import as_utc
from control.errors import InvalidRequest
from control.pairs.repository import PAIR_VERSIONS
from control.pools.repository import POOLS
from control.segments.repository import SEGMENTS
from control.telemetry import repository
from control.telemetry.schemas import WindowAcceptance
from control.telemetry.service import NONE_ID, acceptance_by_response_position
from specwire import Arm, PositionTokens, WindowCounts, add_positions

# The range read when `since` is not given: the hour before `until`.
DEFAULT_RANGE = timedelta(hours=1)
MAX_RANGE = timedelta(days=31)
# NOTE: an hour of one segment at 10 s windows is 720 windows a gateway over both arms
# (one rollout or none), so this covers an hour from 27 gateways; a bigger read is
# truncated at a whole window start and says so (`truncated`, `read_until`).
MAX_SUMMED_WINDOWS = 20_000


def time_range(
    since: datetime | None, until: datetime | None, now: datetime
) -> tuple[datetime, datetime]:
    """[since, until) in UTC: until defaults to now, since to DEFAULT_RANGE before until;
    InvalidRequest when empty or longer than MAX_RANGE."""
    try:
        end = as_utc(until) if until is not None else now
        start = as_utc(since) if since is not None else end - DEFAULT_RANGE
    except OverflowError as exc:  # e.g. until=0001-01-01: no hour before it
        raise InvalidRequest(
            "since/until: out of the representable range", details={"param": "until"}
        ) from exc
    if start >= end:
        raise InvalidRequest(
            f"since ({start.isoformat()}) must be before until ({end.isoformat()})",
            details={"param": "since"},
        )
    if end - start > MAX_RANGE:
        raise InvalidRequest(
            f"since..until spans {end - start}; at most {MAX_RANGE.days} days",
            code="range_too_long",
            details={"param": "since", "max_days": MAX_RANGE.days},
        )
    return start, end


def pool_pair_version(session: Session, pool_id: int) -> int:
    """The pair version whose windows a pool selects (404 for an unknown pool, 422 for
    a baseline pool)."""
    pool = POOLS.get_or_raise(session, pool_id)
    if pool.pair_version_id is None:
        raise InvalidRequest(
            f"pool {pool_id} is a baseline pool: windows carry the pair version, not the "
            "pool, so only a spec pool selects windows (use arm=baseline for the holdout)",
            code="baseline_pool",
            details={"param": "pool_id"},
        )
    return pool.pair_version_id


def selected_pair_version(
    session: Session, *, pool_id: int | None, pair_version_id: int | None
) -> int | None:
    """The pair version whose windows are summed: the one asked for, or the pool's
    (404 for an unknown pool or pair version, 422 for a baseline pool, and 422
    `pair_version_mismatch` when the pool serves another version than the one asked)."""
    pool_version = pool_pair_version(session, pool_id) if pool_id is not None else None
    if pair_version_id is None:
        return pool_version
    PAIR_VERSIONS.get_or_raise(session, pair_version_id)
    if pool_version is not None and pool_version != pair_version_id:
        raise InvalidRequest(
            f"pool_id {pool_id} serves pair version {pool_version}, not pair_version_id "
            f"{pair_version_id}: give one of them, or both naming the same version",
            code="pair_version_mismatch",
            details={
                "param": "pair_version_id",
                "params": ["pool_id", "pair_version_id"],
                "pool_pair_version_id": pool_version,
            },
        )
    return pair_version_id


def window_acceptance(
    session: Session,
    *,
    segment_id: int | None,
    start: datetime,
    end: datetime,
    arm: Arm | None = None,
    pool_id: int | None = None,
    pair_version_id: int | None = None,
    max_windows: int = MAX_SUMMED_WINDOWS,
) -> WindowAcceptance:
    """Acceptance summed over the segment's windows starting in [start, end), oldest
    first, at most `max_windows` of them (404 for an unknown segment, pool or pair
    version). segment_id None: the windows of requests that matched no segment."""
    if segment_id is not None:
        SEGMENTS.get_or_raise(session, segment_id)
    version = selected_pair_version(session, pool_id=pool_id, pair_version_id=pair_version_id)
    rows = repository.acceptance_rows(
        session,
        segment_id=segment_id if segment_id is not None else NONE_ID,
        start=start,
        end=end,
        arm=arm.value if arm is not None else None,
        pair_version_id=version,
        limit=max_windows + 1,
    )
    read_until, summed = _whole_starts(rows, max_windows, end)
    counts = [_counts(row) for row in summed]
    drafts = sum(c.drafts for c in counts)
    drafted = sum(c.drafted_tokens for c in counts)
    accepted = sum(c.accepted_tokens for c in counts)
    per_position = add_positions(c.accepted_per_position for c in counts)
    return WindowAcceptance(
        segment_id=segment_id,
        pool_id=pool_id,
        pair_version_id=version,
        arm=arm.value if arm is not None else None,
        since=start,
        until=end,
        read_until=read_until,
        truncated=read_until < end,
        max_windows=max_windows,
        windows=len(counts),
        requests=sum(c.requests for c in counts),
        drafts=drafts,
        drafted_tokens=drafted,
        accepted_tokens=accepted,
        acceptance_rate=accepted / drafted if drafted else None,
        accepted_per_position=per_position,
        per_position_rate=[n / drafts for n in per_position] if drafts else [],
        acceptance_by_response_position=acceptance_by_response_position(counts),
    )


def _whole_starts(
    rows: Sequence[Row[Any]], max_windows: int, end: datetime
) -> tuple[datetime, Sequence[Row[Any]]]:
    """(read_until, the rows to sum): all of them before `end`, or, past the cap, the
    ones starting before the first row left out, so the sum covers whole window starts
    and since=read_until reads the rest without counting a window twice."""
    if len(rows) <= max_windows:
        return end, rows
    first_left_out = rows[max_windows].window_start
    return first_left_out, [r for r in rows[:max_windows] if r.window_start < first_left_out]


# NOTE: each window is a shallow copy of this one with its counts in: pydantic's
# model_construct fills the other defaults at ~0.4 ms a window (it inspects each
# default factory's signature), which made 20 000 windows take 5 s.
_NO_COUNTS = WindowCounts()


def _counts(row: Row[Any]) -> WindowCounts:
    """The stored columns as a window's counts, unvalidated (ingestion validated them);
    its histograms and moments are not read at all."""
    buckets = row.by_response_position or {}
    return _NO_COUNTS.model_copy(
        update={
            "requests": row.requests,
            "drafts": row.drafts,
            "drafted_tokens": row.drafted_tokens,
            "accepted_tokens": row.accepted_tokens,
            "accepted_per_position": list(row.accepted_per_position or []),
            "by_response_position": {
                b: PositionTokens.model_construct(**t) for b, t in buckets.items()
            },
        }
    )
