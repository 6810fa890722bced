"""Building blocks for automation scenarios: a rollout with its pools and thresholds,
telemetry windows with known acceptance and latency, heartbeats, and task calls."""

import uuid
from dataclasses import dataclass
from typing import Any

from celery import Celery
from sqlalchemy import select

from control.automation.tasks import task_name
from control.contract import (
    LATENCY_BUCKETS_MS,
    Arm,
    LatencyHistogram,
    TelemetryBatch,
    TelemetryWindow,
    WorkerHeartbeat,
)
from control.db import Database
from control.models import (
    AuditEvent,
    Decision,
    Pair,
    PairVersion,
    Pool,
    Rollout,
    Segment,
    TelemetryWindowRow,
    ThresholdSet,
    utcnow,
)
from control.rollouts.service import transition_rollout
from control.rollouts.state_machine import RolloutAction
from control.telemetry.service import ingest_batch
from control.workers.service import record_heartbeat

K = 3
ADMIN = "admin:test"
TASK_TIMEOUT_S = 30.0

THRESHOLDS: dict[str, Any] = {
    "min_acceptance_rate": 0.6,
    "min_mean_acceptance_length": 1.5,
    "min_speedup": 1.1,
    "max_kv_cache_usage": 0.9,
    "min_samples": 50,
    "stage_dwell_seconds": 0,
    "guard_dwell_seconds": 0,
    "probation_percentage": 2.0,
    "cooldown_seconds": 1,
    "memory_pressure_beats": 3,
    "draft_unavailable_seconds": 1,
    "max_inconclusive_rounds": 3,
    "error_rate_alpha": 0.01,
    "sprt_alpha": 0.05,
    "sprt_beta": 0.05,
}


@dataclass(frozen=True)
class Setup:
    rollout_id: int
    segment_id: int
    pair_version_id: int
    spec_pool_id: int
    baseline_pool_id: int
    threshold_set_id: int


def create_rollout(database: Database, **threshold_overrides: Any) -> Setup:
    """A started rollout (canary at the first stage) with its own pair, pools, segment."""
    tag = uuid.uuid4().hex[:8]
    with database.session() as s:
        pair = Pair(name=f"pair-{tag}")
        s.add(pair)
        s.flush()
        version = PairVersion(
            pair_id=pair.id,
            version=1,
            method="draft_model",
            target_ref="tiny-target",
            target_digest="0" * 64,
            draft_ref="tiny-draft",
            draft_digest="1" * 64,
            num_speculative_tokens=K,
            tokenizer_hash="2" * 64,
            engine_version="0.32.0",
        )
        s.add(version)
        s.flush()
        spec = Pool(
            name=f"spec-{tag}",
            served_model_name="tiny",
            target_ref="tiny-target",
            pair_version_id=version.id,
        )
        baseline = Pool(name=f"base-{tag}", served_model_name="tiny", target_ref="tiny-target")
        segment = Segment(name=f"seg-{tag}", selector={})
        thresholds = ThresholdSet(name=f"t-{tag}", version=1, **(THRESHOLDS | threshold_overrides))
        s.add_all([spec, baseline, segment, thresholds])
        s.flush()
        rollout = Rollout(
            name=f"r-{tag}",
            segment_id=segment.id,
            pair_version_id=version.id,
            spec_pool_id=spec.id,
            baseline_pool_id=baseline.id,
            threshold_set_id=thresholds.id,
            stages=[1.0, 5.0, 25.0, 50.0, 100.0],
            cohort_salt=tag,
        )
        s.add(rollout)
        s.flush()
        transition_rollout(
            s,
            rollout.id,
            RolloutAction.START,
            expected_version=rollout.version,
            actor=ADMIN,
            reason="start canary",
            evidence=None,
            task_id=None,
            kind=None,
        )
        return Setup(rollout.id, segment.id, version.id, spec.id, baseline.id, thresholds.id)


def histogram(median_ms: float, samples: int) -> LatencyHistogram:
    """`samples` values spread 1:2:1 over the bucket holding `median_ms` and its neighbours."""
    centre = next(i for i, edge in enumerate(LATENCY_BUCKETS_MS) if median_ms <= edge)
    counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)
    quarter = samples // 4
    counts[centre - 1] += quarter
    counts[centre + 1] += quarter
    counts[centre] += samples - 2 * quarter
    return LatencyHistogram(counts=counts, sum_ms=median_ms * samples)


def spec_counters(alpha: float, drafts: int) -> dict[str, Any]:
    """Per-position counters of iid acceptance `alpha` (expected counts, rounded)."""
    per_position: list[int] = []
    reaching = drafts
    for _ in range(K):
        reaching = round(reaching * alpha)
        per_position.append(reaching)
    return {
        "drafts": drafts,
        "drafted_tokens": drafts * K,
        "accepted_tokens": sum(per_position),
        "accepted_per_position": per_position,
    }


def feed(
    database: Database,
    setup: Setup,
    *,
    spec_alpha: float,
    spec_tpot_ms: float,
    baseline_tpot_ms: float,
    requests: int = 100,
    drafts_per_request: int = 20,
    spec_errors: int = 0,
) -> list[int]:
    """One telemetry batch (a spec and a baseline window) through the ingestion service;
    returns the stored window ids."""
    start = utcnow()
    common: dict[str, Any] = {
        "segment_id": setup.segment_id,
        "rollout_id": setup.rollout_id,
        "window_start": start,
        "window_seconds": 10,
        "requests": requests,
        "completion_tokens": requests * 50,
    }
    spec = TelemetryWindow(
        arm=Arm.SPEC,
        pair_version_id=setup.pair_version_id,
        errors=spec_errors,
        tpot=histogram(spec_tpot_ms, requests),
        e2e=histogram(spec_tpot_ms * 50, requests),
        **common,
        **spec_counters(spec_alpha, requests * drafts_per_request),
    )
    baseline = TelemetryWindow(
        arm=Arm.BASELINE,
        tpot=histogram(baseline_tpot_ms, requests),
        e2e=histogram(baseline_tpot_ms * 50, requests),
        **common,
    )
    gateway = f"gw-{uuid.uuid4().hex[:8]}"

    with database.session() as s:
        ack = ingest_batch(
            s, TelemetryBatch(gateway_id=gateway, window_start=start, windows=[spec, baseline])
        )
        assert ack.stored == 2
        return list(
            s.scalars(select(TelemetryWindowRow.id).where(TelemetryWindowRow.source == gateway))
        )


def good_traffic(database: Database, setup: Setup) -> list[int]:
    return feed(database, setup, spec_alpha=0.8, spec_tpot_ms=10.0, baseline_tpot_ms=20.0)


def heartbeat(
    database: Database,
    setup: Setup,
    worker_id: str,
    *,
    healthy: bool = True,
    draft_loaded: bool = True,
    kv_cache_usage: float = 0.3,
) -> None:
    beat = WorkerHeartbeat(
        sent_at=utcnow(),
        pool_id=setup.spec_pool_id,
        endpoint_url=f"http://127.0.0.1:9/{worker_id}",
        healthy=healthy,
        draft_loaded=draft_loaded,
        kv_cache_usage=kv_cache_usage,
    )
    with database.session() as s:
        record_heartbeat(s, worker_id, beat, default_kv_cache_limit=0.9)


def run_task(app: Celery, name: str, *args: Any, task_id: str | None = None) -> Any:
    """Send through the broker to the real worker and wait for its result."""
    if task_id is not None:
        # A second delivery of the same id would otherwise read the first run's
        # stored result instead of waiting for its own.
        app.AsyncResult(task_id).forget()
    result = app.send_task(task_name(name), args=list(args), task_id=task_id)
    return result.get(timeout=TASK_TIMEOUT_S, interval=0.05)


def rollout(database: Database, rollout_id: int) -> Rollout:
    with database.session() as s:
        row = s.get(Rollout, rollout_id)
        assert row is not None
        s.expunge(row)
        return row


def decisions(database: Database, rollout_id: int) -> list[Decision]:
    with database.session() as s:
        rows = list(
            s.scalars(
                select(Decision).where(Decision.rollout_id == rollout_id).order_by(Decision.id)
            )
        )
        s.expunge_all()
        return rows


def audit_actions(database: Database, rollout_id: int) -> list[tuple[str, str]]:
    with database.session() as s:
        return [
            (e.actor, e.action)
            for e in s.scalars(
                select(AuditEvent)
                .where(AuditEvent.entity_type == "rollout", AuditEvent.entity_id == str(rollout_id))
                .order_by(AuditEvent.id)
            )
        ]


def admin_transition(
    database: Database, rollout_id: int, action: RolloutAction, expected_version: int
) -> Rollout:
    with database.session() as s:
        row = transition_rollout(
            s,
            rollout_id,
            action,
            expected_version=expected_version,
            actor=ADMIN,
            reason=f"admin {action.value}",
            evidence=None,
            task_id=None,
            kind=None,
        )
        s.flush()
        s.expunge(row)
        return row
