"""The spec pool's health as the guards see it, from worker rows and their audit trail."""

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from control.automation import repository
from control.automation.verdicts import PoolHealth
from control.models import Rollout
from control.settings import ControlSettings
from control.workers.identity import exclusion


def spec_pool_health(
    session: Session, rollout: Rollout, settings: ControlSettings, now: datetime
) -> PoolHealth:
    thresholds = rollout.threshold_set
    workers = repository.pool_workers(session, rollout.spec_pool_id)
    stale_after = timedelta(seconds=settings.workers.stale_after_s)
    # NOTE: a worker whose heartbeats stopped still says healthy until the staleness
    # sweep runs; freshness is checked here too so a dead pool cannot look alive.
    healthy = [w for w in workers if w.healthy and now - w.last_heartbeat_at <= stale_after]
    pressured = [w for w in healthy if w.high_memory_beats >= thresholds.memory_pressure_beats]
    spec_pool, digest = rollout.spec_pool, rollout.pair_version.target_digest
    mismatches = [m for w in healthy if (m := exclusion(w, spec_pool, digest)) is not None]
    # NOTE: a mismatched worker gets no traffic (the snapshot excludes it), so it cannot
    # make the draft available either.
    available = [w for w in healthy if w.draft_loaded and exclusion(w, spec_pool, digest) is None]

    unavailable_seconds = 0.0
    if not available:
        changes = repository.last_routing_change(session, [w.id for w in workers])
        last_available = [rollout.state_entered_at]
        for w in workers:
            action, changed_at = changes.get(w.id, ("", w.first_seen_at))
            if (w.healthy or action == "worker.stale") and w.draft_loaded:
                # Its beats stopped (whether or not the staleness sweep has noticed yet):
                # the outage began after its last beat, not when the sweep ran.
                last_available.append(w.last_heartbeat_at)
            else:
                last_available.append(changed_at)
        # NOTE: never longer than the rollout has been in its state: a rollout just
        # re-enabled is judged on the outage it has seen, not on an older one.
        unavailable_seconds = max((now - max(last_available)).total_seconds(), 0.0)

    return PoolHealth(
        workers=len(workers),
        healthy_workers=len(healthy),
        pressured_workers=len(pressured),
        high_beat_workers=sum(1 for w in healthy if w.high_memory_beats > 0),
        max_kv_cache_usage=max((w.kv_cache_usage for w in healthy), default=0.0),
        draft_available=bool(available),
        unavailable_seconds=unavailable_seconds,
        mismatched_workers=len(mismatches),
        mismatch=mismatches[0] if mismatches else None,
    )
