"""Compiling the live control state into one `PolicySnapshot` (ORM rows → contract)."""

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from pydantic import ValidationError
from sqlalchemy.orm import Session

from control.models import PairVersion, Pool, Rollout, Segment, Tenant, Worker
from control.snapshot import repository
from control.workers.identity import exclusion, expected_target_digest
from control.workers.service import is_fresh
from specwire import (
    EXPOSING_STATES,
    DepthLadder,
    PairCapabilities,
    PairVersionSpec,
    PolicySnapshot,
    PoolSnapshot,
    QuotaSpec,
    QuotaWeights,
    RolloutSpec,
    RolloutState,
    SegmentSelector,
    SegmentSpec,
    TenantSpec,
    WorkerSpec,
    lora_module_names,
)

log = logging.getLogger(__name__)


def pair_version_spec(pv: PairVersion) -> PairVersionSpec:
    return PairVersionSpec(
        id=pv.id,
        pair_name=pv.pair.name,
        version=pv.version,
        label=pv.label,
        method=pv.method,
        num_speculative_tokens=pv.num_speculative_tokens,
        target_ref=pv.target_ref,
        draft_ref=pv.draft_ref,
        draft_sample_method=pv.draft_sample_method,
        adapter_id=pv.adapter_id,
        adapter_ref=pv.adapter_ref,
        capabilities=PairCapabilities.model_validate(pv.capabilities or {}),
        engine_version=pv.engine_version,
    )


def worker_spec(
    worker: Worker, now: datetime, stale_after: timedelta, excluded: str | None = None
) -> WorkerSpec:
    return WorkerSpec(
        id=worker.id,
        pool_id=worker.pool_id,
        endpoint_url=worker.endpoint_url,
        healthy=worker.healthy and is_fresh(worker.last_heartbeat_at, now, stale_after),
        draft_loaded=worker.draft_loaded,
        kv_cache_usage=worker.kv_cache_usage,
        running=worker.running,
        waiting=worker.waiting,
        last_heartbeat_at=worker.last_heartbeat_at,
        engine_version=worker.engine_version,
        engine_build=worker.engine_build,
        excluded=excluded,
    )


def pool_snapshot(
    pool: Pool, now: datetime, stale_after: timedelta, baseline_of: dict[int, str] | None = None
) -> PoolSnapshot:
    expected = expected_target_digest(pool, baseline_of or {})
    return PoolSnapshot(
        id=pool.id,
        name=pool.name,
        served_model_name=pool.served_model_name,
        target_ref=pool.target_ref,
        pair_version_id=pool.pair_version_id,
        adapters=pool_adapters(pool),
        workers=[
            worker_spec(w, now, stale_after, exclusion(w, pool, expected, engine=False))
            for w in pool.workers
        ],
    )


def baseline_targets(rollouts: Sequence[Rollout]) -> dict[int, str]:
    """Baseline pool id -> the target digest its rollouts' pair version serves."""
    return {r.baseline_pool_id: r.pair_version.target_digest for r in rollouts}


def pool_adapters(pool: Pool) -> list[str]:
    """What the launcher loads: the pair version's adapter and the pool's lora-modules."""
    names = lora_module_names(pool.engine_args or {})
    pv = pool.pair_version
    if pv is not None and pv.adapter_id and pv.adapter_ref and pv.adapter_id not in names:
        names.insert(0, pv.adapter_id)
    return names


def segment_spec(segment: Segment) -> SegmentSpec | None:
    try:
        selector = SegmentSelector.model_validate(segment.selector)
    except ValidationError as exc:
        # NOTE: one malformed row must not take every gateway's snapshot down; an
        # unknown segment just routes as "no segment" (baseline).
        log.error("segment %s has an invalid selector, left out: %s", segment.id, exc)
        return None
    return SegmentSpec(
        id=segment.id, name=segment.name, priority=segment.priority, selector=selector
    )


def rollout_spec(rollout: Rollout) -> RolloutSpec:
    return RolloutSpec(
        id=rollout.id,
        segment_id=rollout.segment_id,
        pair_version_id=rollout.pair_version_id,
        spec_pool_id=rollout.spec_pool_id,
        baseline_pool_id=rollout.baseline_pool_id,
        state=RolloutState(rollout.state),
        percentage=rollout.percentage,
        holdout_percentage=(
            rollout.threshold_set.holdout_percentage
            if rollout.state == RolloutState.FULL.value
            else 0.0
        ),
        cohort_salt=rollout.cohort_salt,
        version=rollout.version,
        depth_ladder=(
            DepthLadder.model_validate(rollout.depth_ladder) if rollout.depth_ladder else None
        ),
        contract_percentage=(
            rollout.threshold_set.contract_pair_percentage
            if rollout.state == RolloutState.SHADOW.value
            or RolloutState(rollout.state) in EXPOSING_STATES
            else 0.0
        ),
    )


def tenant_spec(tenant: Tenant) -> TenantSpec:
    return TenantSpec(
        id=tenant.id,
        name=tenant.name,
        key_hashes=[k.key_hash for k in tenant.keys if k.revoked_at is None],
        allowed_models=tenant.allowed_models,
        override_allowed=tenant.override_allowed,
        quota=QuotaSpec(weighted_tokens_per_minute=tenant.weighted_tokens_per_minute),
        request_sample_rate=tenant.request_sample_rate,
    )


def compile_snapshot(
    session: Session,
    *,
    version: int,
    now: datetime,
    ttl_seconds: float,
    stale_after: timedelta,
    quota_weights: QuotaWeights,
) -> PolicySnapshot:
    """`version` must have been read in this transaction before the data (see
    control.snapshot.service for why)."""
    segments = [s for s in map(segment_spec, repository.load_segments(session)) if s]
    rollouts = repository.load_rollouts(session)
    pools = repository.load_pools(session)
    referenced = {r.pair_version_id for r in rollouts} | {
        p.pair_version_id for p in pools if p.pair_version_id is not None
    }
    return PolicySnapshot(
        version=version,
        generated_at=now,
        ttl_seconds=ttl_seconds,
        segments=segments,
        rollouts=[rollout_spec(r) for r in rollouts],
        pools=[pool_snapshot(p, now, stale_after, baseline_targets(rollouts)) for p in pools],
        pair_versions=[
            pair_version_spec(pv) for pv in repository.load_pair_versions(session, referenced)
        ],
        tenants=[tenant_spec(t) for t in repository.load_tenants(session)],
        quota_weights=quota_weights,
    )
