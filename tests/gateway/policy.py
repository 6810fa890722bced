"""Real PolicySnapshot documents for gateway tests (served via snapshot_file)."""

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

from specwire import (
    PairCapabilities,
    PairVersionSpec,
    PolicySnapshot,
    PoolSnapshot,
    RolloutSpec,
    RolloutState,
    SegmentSelector,
    SegmentSpec,
    TenantSpec,
    WorkerSpec,
)

TENANT_KEY = "sk-acme-test-key"
OVERRIDE_KEY = "sk-ops-test-key"
LIMITED_KEY = "sk-limited-test-key"
MODEL = "tiny"
SPEC_POOL, BASELINE_POOL = 1, 2
PAIR_ID, SEGMENT_ID, ROLLOUT_ID = 7, 3, 11


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def make_snapshot(
    *,
    spec_urls: list[str],
    baseline_urls: list[str],
    model: str = MODEL,
    percentage: float = 100.0,
    state: RolloutState = RolloutState.FULL,
    version: int = 1,
    ttl_seconds: float = 3600.0,
    generated_at: datetime | None = None,
    capabilities: PairCapabilities | None = None,
    with_rollout: bool = True,
    holdout_percentage: float = 0.0,
    pair_engine_version: str | None = None,
    spec_engine_versions: list[str | None] | None = None,
    contract_percentage: float = 0.0,
) -> PolicySnapshot:
    pair = PairVersionSpec(
        id=PAIR_ID,
        pair_name="tiny",
        version=3,
        label="tiny-v3",
        method="draft_model",
        num_speculative_tokens=3,
        target_ref="engine/tiny_pair/target",
        draft_ref="engine/tiny_pair/draft",
        capabilities=capabilities or PairCapabilities(),
        engine_version=pair_engine_version,
    )

    def workers(
        pool_id: int, urls: list[str], versions: list[str | None] | None = None
    ) -> list[WorkerSpec]:
        return [
            WorkerSpec(
                id=f"p{pool_id}-w{i}",
                pool_id=pool_id,
                endpoint_url=u,
                healthy=True,
                engine_version=versions[i] if versions else None,
            )
            for i, u in enumerate(urls)
        ]

    pools = [
        PoolSnapshot(
            id=SPEC_POOL,
            name="tiny-spec",
            served_model_name=model,
            target_ref="engine/tiny_pair/target",
            pair_version_id=PAIR_ID,
            workers=workers(SPEC_POOL, spec_urls, spec_engine_versions),
        ),
        PoolSnapshot(
            id=BASELINE_POOL,
            name="tiny-base",
            served_model_name=model,
            target_ref="engine/tiny_pair/target",
            workers=workers(BASELINE_POOL, baseline_urls),
        ),
    ]
    rollouts = [
        RolloutSpec(
            id=ROLLOUT_ID,
            segment_id=SEGMENT_ID,
            pair_version_id=PAIR_ID,
            spec_pool_id=SPEC_POOL,
            baseline_pool_id=BASELINE_POOL,
            state=state,
            percentage=percentage,
            holdout_percentage=holdout_percentage,
            cohort_salt="salt-1",
            version=1,
            contract_percentage=contract_percentage,
        )
    ]
    return PolicySnapshot(
        version=version,
        generated_at=generated_at or datetime.now(UTC),
        ttl_seconds=ttl_seconds,
        segments=[
            SegmentSpec(
                id=SEGMENT_ID,
                name="acme-chat",
                priority=10,
                selector=SegmentSelector(tenants=["acme", "ops"]),
            )
        ],
        rollouts=rollouts if with_rollout else [],
        pools=pools,
        pair_versions=[pair],
        tenants=[
            TenantSpec(id=1, name="acme", key_hashes=[key_hash(TENANT_KEY)]),
            TenantSpec(
                id=2, name="ops", key_hashes=[key_hash(OVERRIDE_KEY)], override_allowed=True
            ),
            TenantSpec(
                id=3, name="limited", key_hashes=[key_hash(LIMITED_KEY)], allowed_models=["other"]
            ),
        ],
    )


def stale(snapshot: PolicySnapshot) -> PolicySnapshot:
    return snapshot.model_copy(
        update={"generated_at": datetime.now(UTC) - timedelta(seconds=snapshot.ttl_seconds * 2)}
    )


def write_snapshot(path: Path, snapshot: PolicySnapshot) -> Path:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(snapshot.model_dump_json())
    tmp.replace(path)  # atomic: the poller never reads a half-written file
    return path
