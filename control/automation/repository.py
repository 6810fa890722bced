"""The SQL the automation jobs need: rollouts by state, arm windows, spec-pool
workers, earlier decisions (idempotency) and availability history."""

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import Connection, CursorResult, select, update
from sqlalchemy.orm import Session

from control.models import (
    AuditEvent,
    Decision,
    DepthRecommendation,
    Rollout,
    TelemetryWindowRow,
    Worker,
)
from control.stats.panel import WindowArrays, window_arrays
from control.telemetry.repository import select_windows
from specwire import Arm, OutputContractCounts, RolloutState


def rollout_ids_in_states(session: Session, states: Iterable[RolloutState]) -> list[int]:
    wanted = [s.value for s in states]
    return list(
        session.scalars(select(Rollout.id).where(Rollout.state.in_(wanted)).order_by(Rollout.id))
    )


def get_rollout(session: Session, rollout_id: int) -> Rollout | None:
    return session.get(Rollout, rollout_id)


# Parsed windows by (database, row id and identity). Stored windows never change, and
# the monitors re-read every window since the exposure began on each tick: parsing each
# one once keeps a tick's cost in the new windows, not in the exposure's length.
# NOTE: the key carries the row's identity, not only its id: SQLite can hand a rolled
# back row's id to the next insert.
_Key = tuple[str, int, str, datetime, int]
_PARSED: OrderedDict[_Key, WindowArrays] = OrderedDict()
_PARSED_MAX = 20_000
_PARSED_LOCK = threading.Lock()
_FETCH_CHUNK = 500


def contract_counts(
    session: Session, rollout: Rollout, start: datetime, end: datetime
) -> list[OutputContractCounts]:
    """The paired output checks of the rollout's spec-arm windows in [start, end)."""
    stmt = select_windows(
        start=start,
        end=end,
        rollout_id=rollout.id,
        segment_id=rollout.segment_id,
        arm=Arm.SPEC.value,
        pair_version_id=rollout.pair_version_id,
    ).with_only_columns(TelemetryWindowRow.moments)
    counts: list[OutputContractCounts] = []
    for moments in session.scalars(stmt):
        found = (moments or {}).get("output_contract")
        if found:
            counts.append(OutputContractCounts.model_validate(found))
    return counts


def arm_windows(
    session: Session, rollout: Rollout, arm: Arm, start: datetime, end: datetime
) -> tuple[list[int], list[WindowArrays]]:
    """(ids, parsed windows) of one arm in [start, end), oldest first.

    Only windows the gateway attributed to this rollout: requests whose arm its cohort
    assignment chose. Requests forced to an arm (incompatible parameters, override,
    stale snapshot, fallback) carry no rollout, so they cannot skew the comparison.
    """
    row = TelemetryWindowRow
    # NOTE: a window of 0 requests carries paired output checks only (`contract_counts`).
    stmt = select_windows(
        start=start,
        end=end,
        rollout_id=rollout.id,
        segment_id=rollout.segment_id,
        arm=arm.value,
        pair_version_id=rollout.pair_version_id if arm is Arm.SPEC else None,
    ).where(row.requests > 0)
    bind = session.get_bind()
    database = str(bind.engine.url if isinstance(bind, Connection) else bind.url)
    keys: list[_Key] = [
        (database, i, source, window_start, requests)
        for i, source, window_start, requests in session.execute(
            stmt.with_only_columns(row.id, row.source, row.window_start, row.requests)
        )
    ]
    with _PARSED_LOCK:
        missing = {k[1]: k for k in keys if k not in _PARSED}
    parsed: dict[_Key, WindowArrays] = {}
    ids = list(missing)
    for first in range(0, len(ids), _FETCH_CHUNK):
        chunk = ids[first : first + _FETCH_CHUNK]
        for found in session.scalars(select(row).where(row.id.in_(chunk))):
            parsed[missing[found.id]] = window_arrays(found)
    with _PARSED_LOCK:
        _PARSED.update(parsed)
        windows = [parsed.get(k) or _PARSED[k] for k in keys]
        for k in keys:
            _PARSED.move_to_end(k)
        while len(_PARSED) > _PARSED_MAX:
            _PARSED.popitem(last=False)
    return [k[1] for k in keys], windows


def pool_workers(session: Session, pool_id: int) -> list[Worker]:
    return list(session.scalars(select(Worker).where(Worker.pool_id == pool_id)))


def last_routing_change(
    session: Session, worker_ids: Sequence[str]
) -> dict[str, tuple[str, datetime]]:
    """Each worker's last change of its routing view from the heartbeat service's audit
    trail: ("worker.update" or "worker.stale", when). For a worker unavailable now, that
    change is how and when it became unavailable."""
    if not worker_ids:
        return {}
    rows = session.execute(
        select(AuditEvent.entity_id, AuditEvent.action, AuditEvent.created_at)
        .where(
            AuditEvent.entity_type == "worker",
            AuditEvent.entity_id.in_(list(worker_ids)),
            AuditEvent.action.in_(["worker.update", "worker.stale"]),
        )
        .order_by(AuditEvent.created_at)
    ).all()
    latest: dict[str, tuple[str, datetime]] = {}
    for entity_id, action, created_at in rows:
        latest[str(entity_id)] = (action, created_at)
    return latest


def decision_for_task(session: Session, rollout_id: int, task_id: str) -> Decision | None:
    return session.scalar(
        select(Decision)
        .where(Decision.rollout_id == rollout_id, Decision.task_id == task_id)
        .order_by(Decision.id.desc())
        .limit(1)
    )


def latest_decision(session: Session, rollout_id: int) -> Decision | None:
    return session.scalar(
        select(Decision)
        .where(Decision.rollout_id == rollout_id)
        .order_by(Decision.id.desc())
        .limit(1)
    )


def recommendation_for_task(
    session: Session, rollout_id: int, task_id: str
) -> DepthRecommendation | None:
    return session.scalar(
        select(DepthRecommendation).where(
            DepthRecommendation.rollout_id == rollout_id, DepthRecommendation.task_id == task_id
        )
    )


def count_inconclusive_round(session: Session, rollout_id: int, expected_version: int) -> bool:
    """inconclusive_rounds += 1 if the rollout is still at `expected_version`.

    NOTE: the version is compared but not bumped: a round changes nothing the gateway
    routes on, and bumping would make an admin's If-Match fail for no visible reason.
    """
    result = session.execute(
        update(Rollout)
        .where(Rollout.id == rollout_id, Rollout.version == expected_version)
        .values(inconclusive_rounds=Rollout.inconclusive_rounds + 1),
        execution_options={"synchronize_session": False},
    )
    assert isinstance(result, CursorResult)
    return result.rowcount == 1


def latest_recommendations(
    session: Session, rollout_id: int, limit: int
) -> list[DepthRecommendation]:
    return list(
        session.scalars(
            select(DepthRecommendation)
            .where(DepthRecommendation.rollout_id == rollout_id)
            .order_by(DepthRecommendation.id.desc())
            .limit(limit)
        )
    )
