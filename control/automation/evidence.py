"""What a verdict rests on, as it is stored: one frozen model per statistic.

Everything a verdict rests on is kept in one frozen model (`Evidence`), so the
decision row stores exactly the numbers the rule saw, with the ids of the windows
and, for flips, the block estimates the monitors consumed (`Evidence.as_json`),
which is enough to recompute every statistic without the raw tables. A statistic
that cannot be computed is None and its reason is listed in `missing`: the
verdicts treat missing evidence as "hold", never as pass or fail.

How the numbers are computed: `gather.py`; the budget they share: `budget.py`;
which load the promotion evidence must reach: `load_plan.py`.
"""

import math
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from control.automation.contract import ContractGuard
from control.automation.load_plan import NEXT_STAGE
from control.stats import (
    AcceptanceEstimate,
    AcceptanceMonitor,
    ConfidenceSequence,
    CusumResult,
)


class ArmSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    window_ids: list[int]
    requests: int
    errors: int
    mean_load: float | None


class ThresholdRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    name: str
    version: int


class Budget(BaseModel):
    """How the false-alarm budget is split, and how much of it the monitors have used."""

    model_config = ConfigDict(frozen=True)

    false_alarm_rate: float
    horizon_windows: int
    per_family: float
    promotion_per_stage: float
    spent: dict[str, float]


class StageComparison(BaseModel):
    """Latency of one metric over the current stage, both arms read at one load (each
    arm's line over load, `control.stats.load_model`): speedup = base / spec. The
    interval is the blocks' always-valid interval widened by `slope_bias`, the bound on
    what the slopes' errors and the lines' straightness (`curvature_bias`) can add over
    the distances the arms were moved."""

    model_config = ConfigDict(frozen=True)

    metric: str
    speedup: float
    lower: float
    upper: float
    log_difference: float
    spec_requests: int
    baseline_requests: int
    blocks: int
    at_load: float | None = None  # None: each block at the spec arm's own load
    spec_load: float | None = None  # where the arms' requests were (block-weighted)
    baseline_load: float | None = None
    slope_bias: float = 0.0


class Recent(BaseModel):
    """The last RECENT_SLOTS windows alone: promotion must not rest on a stage whose
    latest windows already look worse (a regression seen before a monitor can alarm)."""

    model_config = ConfigDict(frozen=True)

    slots: int
    log_difference: float | None  # spec - baseline at the spec arm's load
    log_difference_se: float | None
    error_difference: float | None  # spec - baseline error rate
    error_difference_se: float | None


class NextStage(BaseModel):
    """What promotion would do to the spec pool's load, and the evidence at that load.

    In shadow the "next stage" is the canary's first stage: `share_now` is the share of
    the segment's requests actually mirrored (the in-flight cap may skip some), and the
    segment's rate counts the callers' requests alone (a mirror is a copy, not a request).
    """

    model_config = ConfigDict(frozen=True)

    target: str = NEXT_STAGE  # or CANARY_FIRST_STAGE (from shadow)
    share_now: float
    share_next: float
    segment_rate_per_s: float
    spec_workers: int
    spec_load_now: float
    spec_load_next: float
    load_bucket: int
    load_floor: int
    speedup: StageComparison | None
    advice: str | None
    # Where each arm's line may be read ([low, high] loads per worker) and the largest
    # share whose projected load lies inside both: what an admin can promote to instead.
    readable_loads: tuple[float, float] | None = None
    reachable_share: float | None = None


class LatencyGuard(BaseModel):
    """The latency regression monitor and what it judged."""

    model_config = ConfigDict(frozen=True)

    metric: str
    margin: float
    cusum: CusumResult
    # Each block compares the arms at the spec arm's load; the baseline is moved there
    # along its line, and the bound on its slope's error and the line's straightness over
    # that distance raises the CUSUM's null (margin + slope_bias, in log units).
    spec_load: float | None = None
    baseline_load: float | None = None
    slope_bias: float = 0.0


class ErrorGuard(BaseModel):
    model_config = ConfigDict(frozen=True)

    margin: float
    spec_rate: float | None
    baseline_rate: float | None
    cusum: CusumResult
    # This stage's error-rate difference (spec - baseline) with its always-valid interval.
    stage: ConfidenceSequence | None
    # Since the exposure began (error rates do not depend on load), one-sided at
    # NONINFERIORITY_ALPHA (only its upper end is read):
    # promotion needs its upper end below the margin.
    noninferiority: ConfidenceSequence | None = None


class Saturation(BaseModel):
    model_config = ConfigDict(frozen=True)

    recent_waiting: list[float]
    saturated: bool


class Evidence(BaseModel):
    model_config = ConfigDict(frozen=True)

    exposed_since: datetime
    stage_since: datetime
    until: datetime
    thresholds: ThresholdRef
    budget: Budget
    spec: ArmSummary
    baseline: ArmSummary
    acceptance: AcceptanceEstimate | None
    acceptance_monitor: AcceptanceMonitor | None
    latency_guard: LatencyGuard | None
    error_guard: ErrorGuard | None
    stage: dict[str, StageComparison]
    ttft_ratio: float | None  # spec / baseline at the next stage's load (point)
    ttft_ratio_upper: float | None  # its always-valid upper bound
    p95_ratio: float | None
    recent: Recent | None
    next_stage: NextStage | None
    saturation: Saturation
    # The paired greedy checks of the output contract (None: no check read yet).
    output_contract: ContractGuard | None = None
    blocks: dict[str, list[tuple[float, float, int, int]]]
    missing: list[str]

    def as_json(self, *, with_blocks: bool = True) -> dict[str, Any]:
        exclude: dict[str, Any] = {}
        if not with_blocks:
            exclude = {"blocks": True, "acceptance_monitor": {"increments"}}
        document = json_safe(self.model_dump(mode="json", exclude=exclude))
        assert isinstance(document, dict)
        return document

    @property
    def window_ids(self) -> list[int]:
        return sorted(self.spec.window_ids + self.baseline.window_ids)


def json_safe(value: Any) -> Any:
    """Non-finite floats as strings ("inf", "nan"): JSON has no such numbers and
    PostgreSQL's json type rejects them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
