"""Building blocks for automation scenarios: a rollout with its pools and thresholds,
telemetry windows with known acceptance and latency, heartbeats, and task calls."""

import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from celery import Celery
from sqlalchemy import select

from control.automation.tasks import task_name
from control.db import Database
from control.models import (
    AuditEvent,
    Decision,
    Rollout,
    TelemetryWindowRow,
    ThresholdSet,
    utcnow,
)
from control.rollouts.gates import StageGate
from control.rollouts.service import transition_rollout
from control.rollouts.state_machine import RolloutAction
from control.simulation.rollout import seed_rollout
from control.simulation.traffic import ArmModel, TrafficModel, sample_arm
from control.simulation.windows import window_of
from control.telemetry.service import ingest_batch
from control.thresholds.schemas import ThresholdValues
from control.workers.service import record_heartbeat
from specwire import Arm, TelemetryBatch, WorkerHeartbeat

K = 3
ADMIN = "admin:test"
TASK_TIMEOUT_S = 30.0

THRESHOLDS: dict[str, Any] = {
    "min_acceptance_rate": 0.6,
    "min_mean_acceptance_length": 1.5,
    "min_speedup": 1.1,
    "max_kv_cache_usage": 0.9,
    "min_samples": 50,
    # NOTE: promotion needs the error difference's upper bound below the margin; a
    # helper's round of 100 requests per arm can show 10 points, not the default 1.
    "error_rate_margin": 0.1,
    "stage_dwell_seconds": 0,
    "guard_dwell_seconds": 0,
    "probation_percentage": 2.0,
    "cooldown_seconds": 1,
    "memory_pressure_beats": 3,
    "draft_unavailable_seconds": 1,
    "max_inconclusive_rounds": 3,
    "sprt_beta": 0.05,
}
# Windows the helpers feed: outputs of 32-96 tokens, every request on an idle worker
# (load 0, so both arms are compared at matched load).
TRAFFIC = TrafficModel(min_tokens=32, max_tokens=96, k=K, tpot_sigma=0.1, ttft_sigma=0.1)


def threshold_row(name: str = "t", **overrides: Any) -> ThresholdSet:
    """An unsaved threshold set: THRESHOLDS + overrides, the API's defaults for the rest."""
    values = ThresholdValues.model_validate(THRESHOLDS | overrides).model_dump()
    return ThresholdSet(name=name, version=1, **values)


@dataclass(frozen=True)
class Setup:
    rollout_id: int
    segment_id: int
    pair_version_id: int
    spec_pool_id: int
    baseline_pool_id: int
    threshold_set_id: int
    # Each rollout's traffic is its own reproducible stream.
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))


def create_rollout(
    database: Database,
    *,
    shadow: bool = False,
    stages: tuple[float, ...] = (1.0, 5.0, 25.0, 50.0, 100.0),
    **threshold_overrides: Any,
) -> Setup:
    """A started rollout (canary at the first stage, or in shadow) with its own pair,
    pools, segment."""
    tag = uuid.uuid4().hex[:8]
    with database.session() as s:
        seeded = seed_rollout(
            s,
            tag=tag,
            pair_name=f"pair-{tag}",
            model="tiny",
            k=K,
            engine_version="0.32.0",
            thresholds=threshold_row(f"t-{tag}", **threshold_overrides),
            stages=list(stages),
            actor=ADMIN,
            reason="start shadow" if shadow else "start canary",
            # The scenarios judge shadows and canaries: the offline stage is waived, and
            # the shadow too unless the scenario judges it.
            waive=frozenset({StageGate.OFFLINE_EVALUATION}) if shadow else frozenset(StageGate),
        )
        return Setup(
            seeded.rollout.id,
            seeded.segment_id,
            seeded.pair_version_id,
            seeded.spec_pool_id,
            seeded.baseline_pool_id,
            seeded.threshold_set_id,
        )


def batch(
    setup: Setup,
    rng: np.random.Generator,
    *,
    spec_alpha: float = 0.8,
    spec_tpot_ms: float,
    baseline_tpot_ms: float,
    requests: int = 100,
    spec_error_rate: float = 0.0,
) -> TelemetryBatch:
    """A gateway's batch: a spec and a baseline window of `requests` simulated requests each
    (see control.simulation.traffic), starting now."""
    start = utcnow()
    models = {
        Arm.SPEC: ArmModel(
            tpot_ms=spec_tpot_ms,
            load_slope=0.0,
            error_rate=spec_error_rate,
            acceptance=spec_alpha,
        ),
        Arm.BASELINE: ArmModel(tpot_ms=baseline_tpot_ms, load_slope=0.0, error_rate=0.0),
    }
    windows = [
        window_of(
            sample_arm(rng, model, TRAFFIC, requests, 0.0),
            arm=arm,
            segment_id=setup.segment_id,
            pair_version_id=setup.pair_version_id,
            rollout_id=setup.rollout_id,
            window_start=start,
            window_seconds=10,
        )
        for arm, model in models.items()
    ]
    gateway = f"gw-{uuid.uuid4().hex[:8]}"
    return TelemetryBatch(gateway_id=gateway, window_start=start, windows=windows)


def feed(
    database: Database,
    setup: Setup,
    *,
    spec_alpha: float,
    spec_tpot_ms: float,
    baseline_tpot_ms: float,
    requests: int = 100,
    spec_error_rate: float = 0.0,
) -> list[int]:
    """One telemetry batch through the ingestion service; returns the stored window ids."""
    sent = batch(
        setup,
        setup.rng,
        spec_alpha=spec_alpha,
        spec_tpot_ms=spec_tpot_ms,
        baseline_tpot_ms=baseline_tpot_ms,
        requests=requests,
        spec_error_rate=spec_error_rate,
    )
    with database.session() as s:
        ack = ingest_batch(s, sent)
        assert ack.stored == 2
        return list(
            s.scalars(
                select(TelemetryWindowRow.id).where(TelemetryWindowRow.source == sent.gateway_id)
            )
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
    engine_version: str | None = None,
    model_digest: str | None = None,
) -> None:
    beat = WorkerHeartbeat(
        sent_at=utcnow(),
        pool_id=setup.spec_pool_id,
        endpoint_url=f"http://127.0.0.1:9/{worker_id}",
        healthy=healthy,
        draft_loaded=draft_loaded,
        kv_cache_usage=kv_cache_usage,
        engine_version=engine_version,
        model_digest=model_digest,
    )
    with database.session() as s:
        record_heartbeat(s, worker_id, beat, default_kv_cache_limit=0.9)


def idle_spec_pool(database: Database, setup: Setup, workers: int = 20) -> None:
    """Healthy spec workers enough that every stage keeps each under one request in flight:
    the idle load the helpers' windows are measured at, so each stage has evidence."""
    for worker in range(workers):
        heartbeat(database, setup, f"spec-idle-{worker}")


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
