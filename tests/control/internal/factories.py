"""Rows for the internal API tests, built with the ORM as the admin services would."""

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from control.models import (
    ApiKey,
    Pair,
    PairVersion,
    Pool,
    Rollout,
    Segment,
    Tenant,
    ThresholdSet,
)
from control.snapshot.version import bump_snapshot_version
from specwire import WorkerHeartbeat


@dataclass
class World:
    pair_version: PairVersion
    spec_pool: Pool
    baseline_pool: Pool
    segment: Segment
    thresholds: ThresholdSet
    rollout: Rollout
    tenant: Tenant


def thresholds(session: Session, *, max_kv_cache_usage: float = 0.8) -> ThresholdSet:
    row = ThresholdSet(
        name="default",
        version=1,
        min_acceptance_rate=0.3,
        min_mean_acceptance_length=1.2,
        min_speedup=1.05,
        max_kv_cache_usage=max_kv_cache_usage,
        min_samples=100,
        stage_dwell_seconds=60,
        guard_dwell_seconds=30,
        probation_percentage=1.0,
        cooldown_seconds=300,
    )
    session.add(row)
    return row


def build_world(session: Session, *, max_kv_cache_usage: float = 0.8) -> World:
    """A spec pool and a baseline pool for one pair version, a segment with a canary
    rollout, and a tenant with one active and one revoked key; bumps the version."""
    pair = Pair(name="tiny-code")
    pv = PairVersion(
        pair=pair,
        version=3,
        method="draft_model",
        target_ref="/models/tiny-target",
        target_digest="a" * 64,
        draft_ref="/models/tiny-draft",
        draft_digest="b" * 64,
        num_speculative_tokens=3,
        draft_sample_method="probabilistic",
        tokenizer_hash="c" * 64,
        engine_version="0.32.0",
        capabilities={"structured_output": True, "penalties": False},
    )
    spec_pool = Pool(
        name="tiny-spec",
        served_model_name="tiny",
        target_ref="/models/tiny-target",
        pair_version=pv,
        engine_args={"max-model-len": 512, "enforce-eager": True},
        desired_workers=2,
    )
    baseline_pool = Pool(
        name="tiny-base", served_model_name="tiny", target_ref="/models/tiny-target"
    )
    segment = Segment(
        name="code-greedy",
        selector={"tasks": ["code"], "temperature_max": 0.5},
        priority=10,
    )
    ts = thresholds(session, max_kv_cache_usage=max_kv_cache_usage)
    rollout = Rollout(
        name="tiny-code-rollout",
        segment=segment,
        pair_version=pv,
        spec_pool=spec_pool,
        baseline_pool=baseline_pool,
        threshold_set=ts,
        stages=[1.0, 5.0, 25.0, 100.0],
        state="canary",
        percentage=5.0,
        cohort_salt="salt-123",
        version=4,
    )
    tenant = Tenant(
        name="acme",
        allowed_models=["tiny"],
        override_allowed=True,
        weighted_tokens_per_minute=60_000,
    )
    tenant.keys = [
        ApiKey(prefix="sk-a", key_hash="1" * 64),
        ApiKey(prefix="sk-b", key_hash="2" * 64, revoked_at=datetime.now(UTC)),
    ]
    session.add_all([pair, pv, spec_pool, baseline_pool, segment, rollout, tenant])
    session.flush()
    bump_snapshot_version(session)
    return World(pv, spec_pool, baseline_pool, segment, ts, rollout, tenant)


def beat(pool_id: int, **overrides: Any) -> WorkerHeartbeat:
    fields: dict[str, Any] = {
        "pool_id": pool_id,
        "endpoint_url": "http://127.0.0.1:8101",
        "healthy": True,
        "draft_loaded": True,
        "kv_cache_usage": 0.25,
        "running": 2,
        "waiting": 1,
        "sent_at": datetime.now(UTC),
    }
    fields.update(overrides)
    return WorkerHeartbeat(**fields)
