"""Heartbeats from engine agents and the staleness sweep.

The snapshot version moves only when what the gateway routes on changes: a
worker appears, its effective health or draft availability flips, or its
endpoint or pool changes. Load figures (KV cache, queue depth) are stored on
every beat but do not bump the version, so 1 Hz snapshot polls stay 304s.
"""

import logging
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from control.audit.service import record_audit
from control.models import Worker, utcnow
from control.snapshot.version import bump_snapshot_version, current_snapshot_version
from control.workers import repository
from control.workers.errors import UnknownPool, WorkerOfAnotherPool
from specwire import HeartbeatAck, WorkerHeartbeat

log = logging.getLogger(__name__)

SYSTEM_ACTOR = "system:heartbeat"
# Pool ids are 32-bit on PostgreSQL: a larger one cannot exist, and must not reach SQL.
_INT32_MAX = 2**31 - 1


def is_fresh(last_heartbeat_at: datetime, now: datetime, stale_after: timedelta) -> bool:
    return now - last_heartbeat_at <= stale_after


def _routing_view(worker: Worker) -> dict[str, Any]:
    """The fields the compiled snapshot routes on; a change in any of them bumps it."""
    return {
        "pool_id": worker.pool_id,
        "endpoint_url": worker.endpoint_url,
        "healthy": worker.healthy,
        "draft_loaded": worker.draft_loaded,
        # NOTE: gateways keep a pair version off workers of another engine version.
        "engine_version": worker.engine_version,
        # NOTE: request records carry the build of the worker that served them.
        "engine_build": worker.engine_build,
        "model_digest": worker.model_digest,
    }


def record_heartbeat(
    session: Session,
    worker_id: str,
    beat: WorkerHeartbeat,
    *,
    default_kv_cache_limit: float,
    actor: str = SYSTEM_ACTOR,
    now: datetime | None = None,
    enrolled_pool_id: int | None = None,
) -> HeartbeatAck:
    """Register the worker on its first beat, else update it; bump the snapshot when a
    routing-relevant field changed. Unknown pool: UnknownPool (404)."""
    # NOTE: freshness uses the control plane's clock, never the agent's `sent_at`,
    # so a skewed agent clock cannot keep a dead worker in the healthy set.
    now = now or utcnow()
    if not 1 <= beat.pool_id <= _INT32_MAX or repository.get_pool(session, beat.pool_id) is None:
        raise UnknownPool(f"pool {beat.pool_id} does not exist", details={"pool_id": beat.pool_id})
    limit = repository.pool_kv_cache_limit(session, beat.pool_id)
    if limit is None:
        limit = default_kv_cache_limit
    high_memory = beat.kv_cache_usage > limit

    worker = repository.get_worker_for_update(session, worker_id)
    if worker is not None and enrolled_pool_id is not None and worker.pool_id != enrolled_pool_id:
        # An agent enrolled for one pool must not take over (move) another pool's worker.
        raise WorkerOfAnotherPool(
            f"worker {worker_id} belongs to another pool", details={"param": "worker_id"}
        )
    registered = worker is None
    before: dict[str, Any] | None = None
    if worker is None:
        worker = Worker(id=worker_id, first_seen_at=now, high_memory_beats=0)
        session.add(worker)
    else:
        before = _routing_view(worker)

    worker.pool_id = beat.pool_id
    worker.endpoint_url = beat.endpoint_url
    worker.healthy = beat.healthy
    worker.draft_loaded = beat.draft_loaded
    worker.kv_cache_usage = beat.kv_cache_usage
    worker.running = beat.running
    worker.waiting = beat.waiting
    worker.spec_counters = beat.spec.model_dump() if beat.spec is not None else None
    worker.process_memory_bytes = beat.process_memory_bytes
    worker.gpu_memory_bytes = beat.gpu_memory_bytes
    worker.cpu_seconds = beat.cpu_seconds
    worker.generation_tokens = beat.generation_tokens
    worker.engine_telemetry = beat.telemetry.model_dump() if beat.telemetry is not None else None
    worker.engine_version = beat.engine_version
    worker.engine_build = beat.engine_build
    worker.model_digest = beat.model_digest
    worker.high_memory_beats = (worker.high_memory_beats or 0) + 1 if high_memory else 0
    worker.last_heartbeat_at = now
    after = _routing_view(worker)

    if not registered and before == after:
        session.flush()
        return HeartbeatAck(
            worker_id=worker_id,
            registered=False,
            snapshot_version=current_snapshot_version(session),
        )
    event = record_audit(
        session,
        actor=actor,
        action="worker.register" if registered else "worker.update",
        entity_type="worker",
        entity_id=worker_id,
        before=before,
        after=after,
        reason=None if registered else _change_reason(before, after),
    )
    # NOTE: audit times follow the clock of last_heartbeat_at, so the draft-outage
    # timing the automation derives from this trail holds under an injected `now`.
    event.created_at = now
    version = bump_snapshot_version(session)
    return HeartbeatAck(worker_id=worker_id, registered=registered, snapshot_version=version)


def _change_reason(before: dict[str, Any] | None, after: dict[str, Any]) -> str:
    changed = sorted(k for k in after if before is None or before.get(k) != after[k])
    return "heartbeat changed " + ", ".join(changed)


def sweep_stale_workers(
    session: Session, *, stale_after: timedelta, now: datetime | None = None
) -> list[str]:
    """Mark workers unhealthy whose heartbeats stopped; bump the snapshot if any flipped.

    Cheap when nothing is stale (one indexed-size SELECT), so it runs on every
    snapshot request: freshness changes with time alone, and the per-version
    cache of compiled snapshots is only correct if that change bumps the version.
    """
    now = now or utcnow()
    cutoff = now - stale_after
    if not repository.any_stale_healthy_worker(session, cutoff):
        return []
    flipped = repository.mark_stale_workers_unhealthy(session, cutoff)
    if not flipped:
        return []
    for worker_id in flipped:
        event = record_audit(
            session,
            actor="system:staleness",
            action="worker.stale",
            entity_type="worker",
            entity_id=worker_id,
            before={"healthy": True},
            after={"healthy": False},
            reason=f"no heartbeat for more than {stale_after.total_seconds():g} s",
        )
        event.created_at = now
    bump_snapshot_version(session)
    log.info("marked %d stale worker(s) unhealthy: %s", len(flipped), ", ".join(flipped))
    return flipped
