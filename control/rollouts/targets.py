"""Both arms of a rollout serve the same target, compared by weights digest and adapter
set, never by path: a baseline pool on another checkpoint (or another adapter set)
would make every comparison measure the model change instead of speculation."""

from collections.abc import Sequence
from pathlib import Path

from control.errors import InvalidRequest
from control.models import Pool
from control.pairs.artifacts import resolve_ref
from control.snapshot.compiler import pool_adapters
from specwire import artifacts as engine_artifacts


class TargetMismatch(InvalidRequest):
    code = "target_mismatch"


def pool_target_digest(pool: Pool, *, model_roots: Sequence[Path]) -> str:
    """The weights digest of the target the pool serves: its pair version's (checked at
    registration), else computed from the pool's target directory."""
    if pool.pair_version is not None:
        return pool.pair_version.target_digest
    resolved = resolve_ref(pool.target_ref, model_roots, "target_ref")
    try:
        digests = engine_artifacts.weight_digests(Path(resolved), "target")
    except engine_artifacts.ArtifactError as exc:
        raise TargetMismatch(
            f"pool {pool.name!r}: its target {pool.target_ref!r} cannot be read ({exc})",
            details={"pool": pool.name, "target_ref": pool.target_ref},
        ) from exc
    return engine_artifacts.combined_digest(digests)


def check_same_target(spec: Pool, baseline: Pool, *, model_roots: Sequence[Path]) -> None:
    """422 naming both digests (or both adapter sets) when the arms' targets differ."""
    spec_digest = pool_target_digest(spec, model_roots=model_roots)
    baseline_digest = pool_target_digest(baseline, model_roots=model_roots)
    if spec_digest != baseline_digest:
        raise TargetMismatch(
            f"baseline pool {baseline.name!r} serves target {baseline_digest[:12]} but spec "
            f"pool {spec.name!r} serves {spec_digest[:12]}: both arms must serve the same "
            "target weights",
            details={
                "param": "baseline_pool_id",
                "spec_target_digest": spec_digest,
                "baseline_target_digest": baseline_digest,
            },
        )
    spec_adapters, baseline_adapters = set(pool_adapters(spec)), set(pool_adapters(baseline))
    if spec_adapters != baseline_adapters:
        raise TargetMismatch(
            f"baseline pool {baseline.name!r} serves adapters {sorted(baseline_adapters)} but "
            f"spec pool {spec.name!r} serves {sorted(spec_adapters)}",
            details={
                "param": "baseline_pool_id",
                "spec_adapters": sorted(spec_adapters),
                "baseline_adapters": sorted(baseline_adapters),
            },
        )
