"""The SQL the automation jobs need: rollouts by state, arm windows, spec-pool
workers, earlier decisions (idempotency) and availability history."""

from collections.abc import Iterable, Sequence
from datetime import datetime

from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session

from control.contract import Arm, RolloutState, TelemetryWindow
from control.models import AuditEvent, Decision, DepthRecommendation, Rollout, Worker
from control.telemetry.repository import select_windows
from control.telemetry.service import window_from_row


def rollout_ids_in_states(session: Session, states: Iterable[RolloutState]) -> list[int]:
    wanted = [s.value for s in states]
    return list(
        session.scalars(select(Rollout.id).where(Rollout.state.in_(wanted)).order_by(Rollout.id))
    )


def get_rollout(session: Session, rollout_id: int) -> Rollout | None:
    return session.get(Rollout, rollout_id)


def arm_windows(
    session: Session, rollout: Rollout, arm: Arm, start: datetime, end: datetime
) -> tuple[list[int], list[TelemetryWindow]]:
    """(window ids, windows) of one arm of the rollout's segment in [start, end).

    The spec arm is narrowed to the rollout's pair version, so windows of an earlier
    pair version of the same segment never count for this one.
    """
    stmt = select_windows(
        start=start,
        end=end,
        segment_id=rollout.segment_id,
        arm=arm.value,
        pair_version_id=rollout.pair_version_id if arm is Arm.SPEC else None,
    )
    rows = list(session.scalars(stmt))
    return [row.id for row in rows], [window_from_row(row) for row in rows]


def pool_workers(session: Session, pool_id: int) -> list[Worker]:
    return list(session.scalars(select(Worker).where(Worker.pool_id == pool_id)))


def became_unavailable_at(session: Session, worker_ids: Sequence[str]) -> dict[str, datetime]:
    """When each worker last changed its routing view, from the heartbeat service's audit
    trail (`worker.update`, `worker.stale`): for a worker that is unavailable now,
    that change is the moment it became unavailable."""
    if not worker_ids:
        return {}
    rows = session.execute(
        select(AuditEvent.entity_id, AuditEvent.created_at)
        .where(
            AuditEvent.entity_type == "worker",
            AuditEvent.entity_id.in_(list(worker_ids)),
            AuditEvent.action.in_(["worker.update", "worker.stale"]),
        )
        .order_by(AuditEvent.created_at)
    ).all()
    latest: dict[str, datetime] = {}
    for entity_id, created_at in rows:
        latest[str(entity_id)] = created_at
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
