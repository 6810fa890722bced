"""SQL for workers and the thresholds their heartbeats are judged by."""

from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from control.models import Pool, Rollout, ThresholdSet, Worker


def get_pool(session: Session, pool_id: int) -> Pool | None:
    return session.get(Pool, pool_id)


def get_worker_for_update(session: Session, worker_id: str) -> Worker | None:
    # NOTE: FOR UPDATE serializes two heartbeats of one worker on PostgreSQL, so the
    # consecutive high-memory count is never lost; SQLite ignores it (writers serialize).
    return session.scalar(select(Worker).where(Worker.id == worker_id).with_for_update())


def pool_kv_cache_limit(session: Session, pool_id: int) -> float | None:
    """The strictest max KV-cache usage among the threshold sets of rollouts that send
    traffic to this pool as their spec arm; None when no rollout uses the pool."""
    limit = session.scalar(
        select(func.min(ThresholdSet.max_kv_cache_usage))
        .join(Rollout, Rollout.threshold_set_id == ThresholdSet.id)
        .where(Rollout.spec_pool_id == pool_id)
    )
    return float(limit) if limit is not None else None


def any_stale_healthy_worker(session: Session, cutoff: datetime) -> bool:
    found = session.scalar(
        select(Worker.id)
        .where(Worker.healthy.is_(True), Worker.last_heartbeat_at < cutoff)
        .limit(1)
    )
    return found is not None


def mark_stale_workers_unhealthy(session: Session, cutoff: datetime) -> list[str]:
    """Flip healthy workers whose last beat is older than `cutoff`; returns their ids.

    The WHERE clause is re-checked under the row lock, so of two concurrent sweeps
    (or a sweep racing a fresh heartbeat) only one flips a given worker.
    """
    result = session.execute(
        update(Worker)
        .where(Worker.healthy.is_(True), Worker.last_heartbeat_at < cutoff)
        .values(healthy=False)
        .returning(Worker.id),
        # NOTE: "fetch" refreshes Worker objects already loaded in this session.
        execution_options={"synchronize_session": "fetch"},
    )
    return sorted(str(worker_id) for worker_id in result.scalars())
