"""The per-request arm decision: pure, in memory, deterministic for its inputs."""

from dataclasses import dataclass, replace
from typing import Literal

from gateway.decision.cohort import in_spec_cohort
from gateway.decision.features import seed_not_reproducible, spec_incompatibility
from gateway.decision.reasons import DecisionReason as R
from gateway.errors import ModelNotFound, PermissionDenied, ServiceUnavailable
from gateway.proxy.schemas import SamplingParams
from gateway.routing.balancer import runs_version
from specwire import (
    Arm,
    PairCapabilities,
    PairVersionSpec,
    PolicySnapshot,
    PoolSnapshot,
    RequestFeatures,
    RolloutSpec,
    RolloutState,
    SegmentSpec,
    TenantSpec,
)

Override = Literal["on", "off"]

# What a request is checked against when no spec pair serves its model: the
# defaults, built once (read only, never changed).
_NO_PAIR = PairCapabilities()


@dataclass(frozen=True, slots=True)
class Decision:
    arm: Arm
    reason: R
    segment: SegmentSpec | None
    rollout: RolloutSpec | None
    pool: PoolSnapshot
    pair: PairVersionSpec | None  # the pair the chosen pool runs; None on a baseline pool
    # Where to go if `pool` has no usable worker before the first byte; None when
    # switching would change semantics (incompatible parameters) or no other pool exists.
    fallback: PoolSnapshot | None
    fallback_pair: PairVersionSpec | None
    # Shadow stage: the spec pool a copy of this request is mirrored to (response
    # discarded); None when not sampled, or when anything forced the arm.
    mirror: PoolSnapshot | None = None
    # Output contract: (spec pool, baseline pool) to run a copy of this single-choice
    # request on both, in the background, and compare the answers
    # (gateway.proxy.pair_check); None when not sampled.
    pair_check: tuple[PoolSnapshot, PoolSnapshot] | None = None
    adapter: str | None = None  # the LoRA adapter the request named as its model
    # reason incompatible_parameter: the parameter the spec pool cannot serve losslessly
    parameter: str | None = None

    def header(self) -> str:
        adapter = f"adapter={self.adapter}; " if self.adapter is not None else ""
        param = f"; param={self.parameter}" if self.parameter is not None else ""
        if self.arm is Arm.SPEC and self.pair is not None:
            return (
                f"arm=spec; pair={self.pair.label}; "
                f"k={self.pair.num_speculative_tokens}; {adapter}reason={self.reason}{param}"
            )
        return f"arm={self.arm}; {adapter}reason={self.reason}{param}"

    @property
    def pair_version_id(self) -> int | None:
        """Telemetry key: both arms of a rollout carry its pair so they can be compared."""
        if self.rollout is not None:
            return self.rollout.pair_version_id
        return self.pair.id if self.pair is not None else None

    def fall_back(self) -> "Decision":
        assert self.fallback is not None
        return replace(
            self,
            arm=Arm.BASELINE if self.fallback.is_baseline else Arm.SPEC,
            reason=R.POOL_UNAVAILABLE,
            pool=self.fallback,
            pair=self.fallback_pair,
            fallback=None,
            fallback_pair=None,
            mirror=None,
            pair_check=None,
            parameter=None,
        )


@dataclass(frozen=True, slots=True)
class DecisionInput:
    snapshot: PolicySnapshot
    snapshot_age_s: float
    tenant: TenantSpec
    features: RequestFeatures
    body: SamplingParams
    cohort_key: str
    override: Override | None = None
    # Samples the shadow's mirrored share per request (the cohort key when absent).
    request_id: str | None = None


def _engine_version_mismatch(pool: PoolSnapshot | None, pair: PairVersionSpec | None) -> bool:
    """The pair names an engine version and no healthy worker of its pool runs it."""
    if pool is None or pair is None or pair.engine_version is None:
        return False
    healthy = pool.healthy_workers()
    return bool(healthy) and not any(runs_version(w, pair.engine_version) for w in healthy)


def _serves(pool: PoolSnapshot, model: str, adapter: str | None) -> bool:
    return pool.served_model_name == model and (adapter is None or adapter in pool.adapters)


def _pool(
    snapshot: PolicySnapshot, pool_id: int, model: str, adapter: str | None = None
) -> PoolSnapshot | None:
    for p in snapshot.pools:
        if p.id == pool_id and _serves(p, model, adapter):
            return p
    return None


def _first_pool(
    snapshot: PolicySnapshot, model: str, adapter: str | None, *, baseline: bool
) -> PoolSnapshot | None:
    candidates = [
        p for p in snapshot.pools if _serves(p, model, adapter) and p.is_baseline == baseline
    ]
    return min(candidates, key=lambda p: p.id) if candidates else None


def _pair(snapshot: PolicySnapshot, pool: PoolSnapshot | None) -> PairVersionSpec | None:
    if pool is None or pool.pair_version_id is None:
        return None
    return next((v for v in snapshot.pair_versions if v.id == pool.pair_version_id), None)


def _rollout_for(
    snapshot: PolicySnapshot, segment: SegmentSpec, model: str, adapter: str | None
) -> RolloutSpec | None:
    """The segment's rollout whose pools serve the model (and adapter); an exposing one
    first, then newest."""
    usable = [
        r
        for r in snapshot.rollouts
        if r.segment_id == segment.id
        and _pool(snapshot, r.spec_pool_id, model, adapter) is not None
        and _pool(snapshot, r.baseline_pool_id, model, adapter) is not None
    ]
    return max(usable, key=lambda r: (r.exposing, r.id)) if usable else None


def _rollout_arm(
    inp: DecisionInput, segment: SegmentSpec | None, rollout: RolloutSpec | None
) -> tuple[Arm, R]:
    if segment is None:
        return Arm.BASELINE, R.NO_SEGMENT
    if rollout is None:
        return Arm.BASELINE, R.NO_ROLLOUT
    if rollout.state is RolloutState.SHADOW:
        return Arm.BASELINE, R.SHADOW
    if not rollout.exposing:
        return Arm.BASELINE, R.ROLLOUT_INACTIVE
    if rollout.percentage >= 100.0:
        # NOTE: the holdout is the top of the cohort range, so the users on the spec
        # arm at the last stage below full stay there at full (sticky).
        spec_share = 100.0 - rollout.holdout_percentage
        if in_spec_cohort(rollout.cohort_salt, inp.tenant.name, inp.cohort_key, spec_share):
            return Arm.SPEC, R.ROLLOUT_FULL
        return Arm.BASELINE, R.HOLDOUT
    if in_spec_cohort(rollout.cohort_salt, inp.tenant.name, inp.cohort_key, rollout.percentage):
        return Arm.SPEC, R.COHORT_SPEC
    return Arm.BASELINE, R.COHORT_BASELINE


def _adapter_mismatch(
    pair: PairVersionSpec | None, segment: SegmentSpec | None, adapter: str | None
) -> bool:
    """The request's adapter differs from the one the spec pair was built for (either
    may be none). A segment whose selector names the adapter has its own rollout,
    whose acceptance guard measures this adapter's yield, so it does not count."""
    if pair is None or pair.adapter_id == adapter:
        return False
    selector = segment.selector if segment is not None else None
    return not (selector is not None and selector.adapters and adapter in selector.adapters)


def decide(inp: DecisionInput) -> Decision:
    snap, model, adapter = inp.snapshot, inp.features.model, inp.features.adapter
    segment = snap.segment_for(inp.features)
    rollout = _rollout_for(snap, segment, model, adapter) if segment is not None else None
    if rollout is not None:
        spec_pool = _pool(snap, rollout.spec_pool_id, model, adapter)
        baseline_pool = _pool(snap, rollout.baseline_pool_id, model, adapter)
    else:
        spec_pool = _first_pool(snap, model, adapter, baseline=False)
        baseline_pool = _first_pool(snap, model, adapter, baseline=True)
    if spec_pool is None and baseline_pool is None:
        named = adapter if adapter is not None else model
        raise ModelNotFound(f"The model '{named}' does not exist", param="model")
    spec_pair = _pair(snap, spec_pool)
    capabilities = spec_pair.capabilities if spec_pair is not None else _NO_PAIR
    incompatible = spec_incompatibility(inp.body, capabilities)
    seeded = seed_not_reproducible(inp.body, inp.features, capabilities)

    version_mismatch = _engine_version_mismatch(spec_pool, spec_pair)
    arm, reason = _rollout_arm(inp, segment, rollout)
    if arm is Arm.SPEC and incompatible is not None:
        arm, reason = Arm.BASELINE, R.INCOMPATIBLE_PARAMETER
    elif arm is Arm.SPEC and seeded:
        arm, reason = Arm.BASELINE, R.SEED_NOT_REPRODUCIBLE
    elif arm is Arm.SPEC and version_mismatch:
        arm, reason = Arm.BASELINE, R.ENGINE_VERSION_MISMATCH
    elif arm is Arm.SPEC and _adapter_mismatch(spec_pair, segment, adapter):
        arm, reason = Arm.BASELINE, R.ADAPTER_MISMATCH
    if inp.override is not None:
        if not inp.tenant.override_allowed:
            raise PermissionDenied(
                "This key may not use the x-specroute-speculation header",
                code="override_not_allowed",
                param="x-specroute-speculation",
            )
        if inp.override == "off":
            arm, reason = Arm.BASELINE, R.OVERRIDE_HEADER
        elif incompatible is not None:
            arm, reason = Arm.BASELINE, R.INCOMPATIBLE_PARAMETER
        elif seeded:
            arm, reason = Arm.BASELINE, R.SEED_NOT_REPRODUCIBLE
        elif version_mismatch:
            arm, reason = Arm.BASELINE, R.ENGINE_VERSION_MISMATCH
        elif spec_pool is not None:
            arm, reason = Arm.SPEC, R.OVERRIDE_HEADER
    stale = inp.snapshot_age_s > snap.ttl_seconds
    if stale:
        arm, reason = Arm.BASELINE, R.SNAPSHOT_STALE

    primary = spec_pool if arm is Arm.SPEC else baseline_pool
    other = baseline_pool if arm is Arm.SPEC else spec_pool
    # NOTE: a request with parameters the spec pool cannot serve losslessly never
    # lands there, not even as a fallback. (A seeded request may: its text is still
    # drawn from the right distribution, only not reproducibly, and served beats a 503;
    # the header then says pool_unavailable.)
    # Nor does anything while the snapshot is stale: the spec pool may have been
    # disabled since (memory pressure, draft gone) and we would not know.
    if other is spec_pool and (incompatible is not None or stale or version_mismatch):
        other = None
    decision = Decision(
        arm=arm,
        reason=reason,
        segment=segment,
        rollout=rollout,
        pool=primary if primary is not None else _unreachable(other, incompatible is not None),
        pair=_pair(snap, primary),
        fallback=other if primary is not None else None,
        fallback_pair=_pair(snap, other) if primary is not None else None,
        adapter=adapter,
        parameter=(
            incompatible.param
            if incompatible is not None and reason is R.INCOMPATIBLE_PARAMETER
            else None
        ),
    )
    # NOTE: what the spec arm may not serve (parameters it cannot serve losslessly, a
    # seed it would not honour, a worker of another engine version, another adapter)
    # is never mirrored either.
    mirrorable = (
        reason is R.SHADOW
        and incompatible is None
        and not seeded
        and not version_mismatch
        and not _adapter_mismatch(spec_pair, segment, adapter)
        and spec_pool is not None
    )
    if mirrorable and primary is not None and rollout is not None:
        sample_key = inp.request_id or inp.cohort_key
        if in_spec_cohort(rollout.cohort_salt, inp.tenant.name, sample_key, rollout.percentage):
            decision = replace(decision, mirror=spec_pool)
    if (
        rollout is not None
        and rollout.contract_percentage > 0.0
        and (rollout.state is RolloutState.SHADOW or rollout.exposing)
        and (inp.body.n or 1) == 1
        and incompatible is None
        and not version_mismatch
        and not stale
        and not _adapter_mismatch(spec_pair, segment, adapter)
        and spec_pool is not None
        and baseline_pool is not None
    ):
        # NOTE: salted apart from the cohort and the shadow's sample, so the paired share
        # is drawn across both arms' callers alike.
        sample_key = inp.request_id or inp.cohort_key
        salt = f"{rollout.cohort_salt}|contract"
        if in_spec_cohort(salt, inp.tenant.name, sample_key, rollout.contract_percentage):
            decision = replace(decision, pair_check=(spec_pool, baseline_pool))
    if primary is None:
        # The arm's pool does not exist at all: go straight to the other one.
        return replace(
            decision,
            arm=Arm.BASELINE if decision.pool.is_baseline else Arm.SPEC,
            reason=R.POOL_UNAVAILABLE,
            pair=_pair(snap, decision.pool),
            parameter=None,
        )
    return decision


def _unreachable(other: PoolSnapshot | None, incompatible: bool) -> PoolSnapshot:
    if other is None:
        why = "parameters the speculative pool cannot serve" if incompatible else "this model"
        raise ServiceUnavailable(f"No pool can serve {why}", code="no_pool")
    return other
