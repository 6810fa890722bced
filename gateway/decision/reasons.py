"""Why a request went to the arm it went to (the `reason=` of the decision header)."""

from enum import StrEnum


class DecisionReason(StrEnum):
    ROLLOUT_FULL = "rollout_full"
    COHORT_SPEC = "cohort_spec"
    COHORT_BASELINE = "cohort_baseline"
    HOLDOUT = "holdout"  # a full rollout's baseline holdout cohort
    INCOMPATIBLE_PARAMETER = "incompatible_parameter"
    # A seed at temperature > 0, and the spec pair does not declare that its engines
    # reproduce seeded sampling: the baseline arm honours the seed.
    SEED_NOT_REPRODUCIBLE = "seed_not_reproducible"
    # The pair version was validated on another engine version than its healthy spec
    # workers report: never served there (neither as the arm nor as a fallback).
    ENGINE_VERSION_MISMATCH = "engine_version_mismatch"
    # The request's LoRA adapter is not the one the spec pool's pair version was built
    # for, and no rollout measures the yield of this (segment, adapter).
    ADAPTER_MISMATCH = "adapter_mismatch"
    OVERRIDE_HEADER = "override_header"
    SNAPSHOT_STALE = "snapshot_stale"
    POOL_UNAVAILABLE = "pool_unavailable"
    NO_ROLLOUT = "no_rollout"
    ROLLOUT_INACTIVE = "rollout_inactive"
    # A rollout in shadow: the caller is served by the baseline arm (`shadow`); a sampled
    # share is also mirrored to the spec pool, response discarded (`shadow_mirror`).
    SHADOW = "shadow"
    SHADOW_MIRROR = "shadow_mirror"
    NO_SEGMENT = "no_segment"
    # Refused before any arm was chosen (key, body, model, override permission).
    REJECTED = "rejected"


# Reasons where the rollout's cohort assignment chose the arm: only these requests are
# the rollout's evidence (telemetry carries the rollout id for them alone), so that
# requests forced to one arm (incompatible parameters, override, fallback) cannot
# make the arms differ in anything but speculation.
RANDOMIZED: frozenset[DecisionReason] = frozenset(
    {
        DecisionReason.ROLLOUT_FULL,
        DecisionReason.COHORT_SPEC,
        DecisionReason.COHORT_BASELINE,
        DecisionReason.HOLDOUT,
        DecisionReason.SHADOW,
        DecisionReason.SHADOW_MIRROR,
    }
)

# The decision header of a completion request refused before routing.
NOT_ROUTED_HEADER = f"arm=none; reason={DecisionReason.REJECTED}"
