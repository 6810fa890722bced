"""Request and response bodies of the threshold-sets API."""

from datetime import datetime
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

Ratio = Field(ge=0.0, le=1.0)
# What a stage does once its speedup is conclusively below min_speedup at its own load.
NoBenefitAction = Literal["pause", "rollback"]


class ThresholdValues(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min_acceptance_rate: float = Field(ge=0.0, le=1.0)
    min_mean_acceptance_length: float = Field(ge=0.0, le=64.0)
    min_speedup: float = Field(gt=0.0, le=100.0)
    max_kv_cache_usage: float = Field(gt=0.0, le=1.0)
    min_samples: int = Field(ge=1, le=10_000_000)
    stage_dwell_seconds: int = Field(ge=0, le=30 * 86400)
    guard_dwell_seconds: int = Field(ge=0, le=30 * 86400)
    probation_percentage: float = Field(gt=0.0, le=100.0)
    cooldown_seconds: int = Field(ge=0, le=30 * 86400)
    memory_pressure_beats: int = Field(default=3, ge=1, le=1000)
    draft_unavailable_seconds: int = Field(default=60, ge=1, le=86400)
    max_inconclusive_rounds: int = Field(default=5, ge=1, le=1000)
    no_benefit_action: NoBenefitAction = Field(
        default="pause",
        description="When a stage's speedup at its own load is conclusively below "
        "min_speedup: pause (an admin decides) or rollback (canary, ramping; full and "
        "probation disable). Pause suits min_speedup > 1 (not faster enough); rollback "
        "suits min_speedup = 1 (conclusively slower).",
    )
    sprt_beta: float = Field(
        default=0.05, gt=0.0, lt=0.5, description="P(promotion evidence | acceptance too low)."
    )
    false_alarm_rate: float = Field(
        default=0.01,
        gt=0.0,
        le=0.2,
        description="Family-wise P(a flip on a false alarm) over the horizon, split evenly "
        "over acceptance, latency, errors and promotion.",
    )
    false_alarm_horizon_windows: int = Field(
        default=1000, ge=10, le=1_000_000, description="Telemetry windows the budget covers."
    )
    acceptance_indifference: float = Field(
        default=0.1,
        ge=0.02,
        le=0.5,
        description="Acceptable acceptance = min_acceptance_rate + this; in between the "
        "acceptance test may take either side.",
    )
    latency_margin: float = Field(
        default=0.1,
        ge=0.01,
        le=10.0,
        description="Relative slowdown (matched load, end-to-end per token) tolerated before "
        "a rollback; also the p95 margin for promotion.",
    )
    ttft_margin: float = Field(
        default=0.25, ge=0.01, le=10.0, description="Relative TTFT slowdown that blocks promotion."
    )
    error_rate_margin: float = Field(
        default=0.01, ge=0.0005, le=1.0, description="Absolute error-rate increase tolerated."
    )
    error_rate_relative_margin: float = Field(
        default=0.5,
        ge=0.0,
        le=100.0,
        description="Relative error-rate increase tolerated (the larger margin applies).",
    )
    holdout_percentage: float = Field(
        default=10.0,
        ge=0.5,
        le=50.0,
        description="Baseline share kept at full, so the guards never go blind. Its size "
        "sets how fast a regression after full is seen: the comparison's power grows with "
        "the baseline's share (10 %: 97-100 % of simulated regressions caught within 3 "
        "windows; 5 %: 53-67 %).",
    )
    min_block_requests: int = Field(
        default=10, ge=2, le=100_000, description="Requests per arm in one monitoring block."
    )
    offline_min_mean_acceptance_length: float = Field(
        default=1.5,
        ge=0.0,
        le=64.0,
        description="Offline stage: the evaluation's mean acceptance length (tokens per target "
        "pass, bonus token included) must reach this; must be > 1.",
    )
    offline_min_expected_speedup: float = Field(
        default=1.05,
        ge=0.0,
        le=100.0,
        description="Offline stage: closed-form expected speedup at the pair's depth and the "
        "spec pool's measured cost ratio must reach this; must be > 1.",
    )
    offline_min_cases: int = Field(
        default=20, ge=1, le=10_000_000, description="Offline stage: cases the evaluation ran."
    )
    offline_max_stale_fraction: float = Field(
        default=0.1,
        ge=0.0,
        lt=1.0,
        description="Offline stage: largest share of the evaluation's cases past their "
        "refresh-by date.",
    )
    shadow_percentage: float = Field(
        default=10.0,
        gt=0.0,
        le=100.0,
        description="Shadow stage: share of the segment's requests mirrored to the spec pool.",
    )
    contract_pair_percentage: float = Field(
        default=2.0,
        ge=0.0,
        le=100.0,
        description="Output contract: share of the rollout's single-choice requests run on "
        "both arms in the background and compared: token for token at T=0, by the target's "
        "log-probability of each arm's completion at T > 0 (0: no paired checks). Each "
        "costs one extra request on each pool.",
    )
    contract_max_mismatch: float = Field(
        default=0.01,
        gt=0.0,
        lt=0.5,
        description="Output contract: the share of unequal greedy pairs tolerated (> 0: fp32 "
        "kernels can break near-ties differently); the guard disables a rollout whose "
        "mismatch rate is provably above it.",
    )
    contract_sampled_margin: float = Field(
        default=0.15,
        gt=0.0,
        lt=0.5,
        description="Output contract at T > 0: lossless speculation makes the spec arm's "
        "completion the likelier one in half the sampled pairs; the guard disables a "
        "rollout whose share is provably above 1/2 + this margin or below 1/2 - it (the "
        "margin tolerates kernels that score near-ties differently).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        acceptable = self.min_acceptance_rate + self.acceptance_indifference
        if self.min_acceptance_rate <= 0.0 or acceptable >= 1.0:
            # NOTE: the acceptance SPRT tests rate <= min against rate >= min + indifference;
            # with min 0 or min + indifference >= 1 one hypothesis is empty.
            raise ValueError(
                f"the acceptance test needs 0 < min_acceptance_rate ({self.min_acceptance_rate:g}) "
                f"and min_acceptance_rate + acceptance_indifference ({acceptable:g}) < 1"
            )
        # NOTE: a mean acceptance length counts the target's own token, so 1 is what a
        # draft that never lands a token reaches; a speedup of 1 admits no gain at all.
        if self.offline_min_mean_acceptance_length <= 1.0:
            raise ValueError(
                "offline_min_mean_acceptance_length "
                f"({self.offline_min_mean_acceptance_length:g}) must be > 1: every draft "
                "reaches 1"
            )
        if self.offline_min_expected_speedup <= 1.0:
            raise ValueError(
                f"offline_min_expected_speedup ({self.offline_min_expected_speedup:g}) must be "
                "> 1: a lower bar admits drafts that slow the segment down"
            )
        return self


class ThresholdSetCreate(ThresholdValues):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ThresholdSetChange(BaseModel):
    """Any subset of the values; the rest is copied from the version changed."""

    model_config = ConfigDict(extra="forbid")

    min_acceptance_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    min_mean_acceptance_length: float | None = Field(default=None, ge=0.0, le=64.0)
    min_speedup: float | None = Field(default=None, gt=0.0, le=100.0)
    max_kv_cache_usage: float | None = Field(default=None, gt=0.0, le=1.0)
    min_samples: int | None = Field(default=None, ge=1, le=10_000_000)
    stage_dwell_seconds: int | None = Field(default=None, ge=0, le=30 * 86400)
    guard_dwell_seconds: int | None = Field(default=None, ge=0, le=30 * 86400)
    probation_percentage: float | None = Field(default=None, gt=0.0, le=100.0)
    cooldown_seconds: int | None = Field(default=None, ge=0, le=30 * 86400)
    memory_pressure_beats: int | None = Field(default=None, ge=1, le=1000)
    draft_unavailable_seconds: int | None = Field(default=None, ge=1, le=86400)
    max_inconclusive_rounds: int | None = Field(default=None, ge=1, le=1000)
    no_benefit_action: NoBenefitAction | None = None
    sprt_beta: float | None = Field(default=None, gt=0.0, lt=0.5)
    false_alarm_rate: float | None = Field(default=None, gt=0.0, le=0.2)
    false_alarm_horizon_windows: int | None = Field(default=None, ge=10, le=1_000_000)
    acceptance_indifference: float | None = Field(default=None, ge=0.02, le=0.5)
    latency_margin: float | None = Field(default=None, ge=0.01, le=10.0)
    ttft_margin: float | None = Field(default=None, ge=0.01, le=10.0)
    error_rate_margin: float | None = Field(default=None, ge=0.0005, le=1.0)
    error_rate_relative_margin: float | None = Field(default=None, ge=0.0, le=100.0)
    holdout_percentage: float | None = Field(default=None, ge=0.5, le=50.0)
    min_block_requests: int | None = Field(default=None, ge=2, le=100_000)
    offline_min_mean_acceptance_length: float | None = Field(default=None, ge=0.0, le=64.0)
    offline_min_expected_speedup: float | None = Field(default=None, ge=0.0, le=100.0)
    offline_min_cases: int | None = Field(default=None, ge=1, le=10_000_000)
    offline_max_stale_fraction: float | None = Field(default=None, ge=0.0, lt=1.0)
    shadow_percentage: float | None = Field(default=None, gt=0.0, le=100.0)
    contract_pair_percentage: float | None = Field(default=None, ge=0.0, le=100.0)
    contract_max_mismatch: float | None = Field(default=None, gt=0.0, lt=0.5)
    contract_sampled_margin: float | None = Field(default=None, gt=0.0, lt=0.5)


class ThresholdSet(ThresholdValues):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    version: int
    created_at: datetime
