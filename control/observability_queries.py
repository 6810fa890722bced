"""SQL behind the control plane's Prometheus collector: small aggregate reads, one
function per metric family, returning plain tuples."""

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.models import Decision, Pool, Rollout, Segment, ThresholdSet, Worker


def rollout_states(s: Session) -> list[tuple[str, str, str, float]]:
    """(rollout name, segment name, state, percentage) for every rollout."""
    rows = s.execute(
        select(Rollout.name, Segment.name, Rollout.state, Rollout.percentage).join(
            Segment, Segment.id == Rollout.segment_id
        )
    ).all()
    return [(r, seg, st, float(p)) for r, seg, st, p in rows]


def decision_counts(s: Session) -> list[tuple[str, str, str, int]]:
    """(kind, to_state, actor prefix, count): decisions grouped by kind and target state."""
    actor_type = func.substr(Decision.actor, 1, 10)
    rows = s.execute(
        select(Decision.kind, Decision.to_state, actor_type, func.count()).group_by(
            Decision.kind, Decision.to_state, actor_type
        )
    ).all()
    return [(k, to, str(a), int(n)) for k, to, a, n in rows]


def pools(s: Session) -> list[tuple[int, str, int | None]]:
    """(pool id, name, pair version id or None for a baseline pool)."""
    return [(i, n, pv) for i, n, pv in s.execute(select(Pool.id, Pool.name, Pool.pair_version_id))]


def worker_health_counts(s: Session) -> dict[tuple[int, bool], int]:
    """Workers per (pool id, healthy as last reported)."""
    rows = s.execute(
        select(Worker.pool_id, Worker.healthy, func.count()).group_by(
            Worker.pool_id, Worker.healthy
        )
    ).all()
    return {(pool_id, bool(healthy)): int(n) for pool_id, healthy, n in rows}


def worker_kv_usage(s: Session) -> list[tuple[str, str, float]]:
    """(pool name, worker id, KV-cache usage last reported)."""
    rows = s.execute(
        select(Pool.name, Worker.id, Worker.kv_cache_usage).join(Pool, Pool.id == Worker.pool_id)
    ).all()
    return [(p, w, float(u)) for p, w, u in rows]


def pool_queue_depth(s: Session) -> dict[int, tuple[int, int]]:
    """Pool id -> (running, waiting) summed over its healthy workers' last heartbeats."""
    rows = s.execute(
        select(Worker.pool_id, func.sum(Worker.running), func.sum(Worker.waiting))
        .where(Worker.healthy.is_(True))
        .group_by(Worker.pool_id)
    ).all()
    return {pool_id: (int(r or 0), int(w or 0)) for pool_id, r, w in rows}


def rollout_acceptance_thresholds(s: Session) -> list[tuple[str, str, float]]:
    """(rollout, segment, min_acceptance_rate of its threshold set) for exposing rollouts:
    the threshold the acceptance guard tests against."""
    rows = s.execute(
        select(Rollout.name, Segment.name, ThresholdSet.min_acceptance_rate)
        .join(Segment, Segment.id == Rollout.segment_id)
        .join(ThresholdSet, ThresholdSet.id == Rollout.threshold_set_id)
        .where(Rollout.state.in_(["canary", "ramping", "full", "probation"]))
    ).all()
    return [(r, seg, float(m)) for r, seg, m in rows]


def segment_slos(s: Session) -> list[tuple[str, float, float]]:
    """(segment name, TTFT p95 target, TPOT p95 target) in seconds, for every segment."""
    rows = s.execute(select(Segment.name, Segment.ttft_slo_p95_s, Segment.tpot_slo_p95_s)).all()
    return [(name, float(ttft), float(tpot)) for name, ttft, tpot in rows]


def worker_cost_counters(
    s: Session,
) -> list[tuple[str, str, int | None, float | None, int | None, int | None]]:
    """(pool name, worker id, the pool's pair version id, CPU seconds, accepted draft
    tokens, generated tokens) as each worker's last heartbeat reported them."""
    rows = s.execute(
        select(
            Pool.name,
            Worker.id,
            Pool.pair_version_id,
            Worker.cpu_seconds,
            Worker.spec_counters,
            Worker.generation_tokens,
        ).join(Pool, Pool.id == Worker.pool_id)
    ).all()
    out = []
    for pool, worker, pv, cpu, spec, generated in rows:
        accepted = int(spec["num_accepted_tokens"]) if spec else None
        out.append((pool, worker, pv, cpu, accepted, generated))
    return out


def worker_engine_telemetry(
    s: Session,
) -> list[tuple[str, str, int | None, int, dict[str, Any] | None]]:
    """(pool name, worker id, the pool's pair version id, running sequences, the engine
    telemetry dict) as each worker's last heartbeat reported them."""
    rows = s.execute(
        select(
            Pool.name, Worker.id, Pool.pair_version_id, Worker.running, Worker.engine_telemetry
        ).join(Pool, Pool.id == Worker.pool_id)
    ).all()
    return [(p, w, pv, int(r or 0), t) for p, w, pv, r, t in rows]
