"""Telemetry windows of a rollout's two arms turned into the statistics that decide.

Two spans of windows are read:

- **Since the exposure began** (`Rollout.exposed_since`, capped at
  `monitor_lookback_seconds`): the sequential monitors that can flip a
  rollout — acceptance (SPRT, the request as unit), load-matched latency
  regression and error-rate regression (CUSUMs with practical margins) — and
  the saturation check. They run continuously across stage changes: a
  load-matched comparison does not care which stage produced it, and a
  regression that starts mid-stage or after `full` is caught by the CUSUM
  within a few blocks.
- **Since the current stage began**: what promotion needs — the load-matched
  speedup at the load the spec pool will carry at the *next* stage (an
  always-valid confidence sequence whose lower end must clear `min_speedup`),
  TTFT and p95 at matched load, and the projection itself.

One false-alarm budget (`false_alarm_rate` over `false_alarm_horizon_windows`)
is split evenly over the four families that can flip a rollout: acceptance,
latency, errors, and promotion (the last shared by the rollout's stages).

Everything a verdict rests on is kept in one frozen model, so the decision row
stores exactly the numbers the rule saw, with the ids of the windows and, for
flips, the block estimates the monitors consumed (`Evidence.as_json`), which
is enough to recompute every statistic without the raw tables. A statistic
that cannot be computed is None and its reason is listed in `missing`: the
verdicts treat missing evidence as "hold", never as pass or fail.
"""

import itertools
import math
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy.orm import Session

from control.automation import repository
from control.contract import LOAD_BUCKET_EDGES, Arm, RolloutState, load_bucket
from control.models import Rollout, ThresholdSet
from control.rollouts.state_machine import canary_stage, next_stage
from control.settings import ControlSettings
from control.stats import (
    AcceptanceEstimate,
    AcceptanceMonitor,
    ArmPanel,
    BlockEstimate,
    ConfidenceSequence,
    CusumResult,
    SprtConfig,
    StatsError,
    build_panel,
    confidence_sequence,
    error_blocks,
    estimate_acceptance,
    gaussian_cusum,
    latency_blocks,
    matched_difference,
    matched_quantile_ratio,
    monitor_acceptance,
    pooled_log_variance,
    projected_spec_load,
)
from control.stats.panel import METRICS, WindowArrays

E2E_PER_TOKEN, TTFT, TPOT = (METRICS.index(m) for m in ("e2e_per_token", "ttft", "tpot"))
FAMILIES = ("acceptance", "latency", "errors", "promotion")
# Design shifts of the CUSUMs, as multiples of the margin: the size of a real
# regression is unknown, so several run side by side (Bonferroni over them).
SHIFT_MULTIPLES = (0.25, 0.5, 1.0, 2.0, 4.0)
# Scale (in log-latency units) of the normal mixture behind the promotion interval:
# it is tightest for effects of about this size (10 %).
MIXTURE_SCALE = 0.1
# ... and of the error-rate difference's interval: tightest around 5 points.
ERROR_MIXTURE_SCALE = 0.05
SATURATION_WINDOWS = 4
# The stage whose load promotion evidence must reach (`NextStage.target`).
NEXT_STAGE = "next stage"
CANARY_FIRST_STAGE = "canary's first stage"


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
    """Load-matched latency of one metric over the current stage: speedup = base / spec."""

    model_config = ConfigDict(frozen=True)

    metric: str
    speedup: float
    lower: float
    upper: float
    log_difference: float
    spec_requests: int
    baseline_requests: int
    blocks: int


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


class LatencyGuard(BaseModel):
    """The latency regression monitor and what it judged."""

    model_config = ConfigDict(frozen=True)

    metric: str
    margin: float
    cusum: CusumResult


class ErrorGuard(BaseModel):
    model_config = ConfigDict(frozen=True)

    margin: float
    spec_rate: float | None
    baseline_rate: float | None
    cusum: CusumResult
    # This stage's error-rate difference (spec - baseline) with its always-valid interval.
    stage: ConfidenceSequence | None


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
    ttft_ratio: float | None
    p95_ratio: float | None
    next_stage: NextStage | None
    saturation: Saturation
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


def sprt_config(thresholds: ThresholdSet) -> SprtConfig:
    """H1: acceptance <= min_acceptance_rate; H0: >= min + acceptance_indifference."""
    unacceptable = thresholds.min_acceptance_rate
    return SprtConfig(
        acceptable_rate=unacceptable + thresholds.acceptance_indifference,
        unacceptable_rate=unacceptable,
        alpha=family_alpha(thresholds),
        beta=thresholds.sprt_beta,
        min_trials=max(thresholds.min_samples, 1),
    )


def family_alpha(thresholds: ThresholdSet) -> float:
    return thresholds.false_alarm_rate / len(FAMILIES)


def promotion_alpha(thresholds: ThresholdSet, stages: list[float]) -> float:
    return family_alpha(thresholds) / max(len(stages), 1)


def holdout_share(thresholds: ThresholdSet) -> float:
    """The spec arm's share at `full`: everything but the baseline holdout."""
    return 100.0 - thresholds.holdout_percentage


def spec_share(rollout: Rollout) -> float:
    if rollout.state == RolloutState.FULL.value:
        return holdout_share(rollout.threshold_set)
    return rollout.percentage


class LoadPlan(BaseModel):
    """The spec arm's share now and at the stage judged for, and the segment's rate."""

    model_config = ConfigDict(frozen=True)

    target: str
    share_now: float
    share_next: float
    segment_rate_per_s: float


def load_plan(
    rollout: Rollout,
    thresholds: ThresholdSet,
    *,
    spec_requests: int,
    baseline_requests: int,
    seconds: float,
) -> LoadPlan:
    """Which stage's load the evidence must reach, from this stage's request counts.

    Canary, ramping, probation: the next stage (full keeps the holdout); both arms'
    requests are the segment's. Shadow: the canary's first stage; every request of the
    segment is served by the baseline arm, so its count alone is the segment's rate,
    and the share on the spec pool is what was mirrored (at most `shadow_percentage`,
    less when the gateways' in-flight cap skipped mirrors).
    """
    assert seconds > 0, seconds
    stages = list(rollout.stages)
    if rollout.state == RolloutState.SHADOW.value:
        mirrored = 100.0 * spec_requests / baseline_requests if baseline_requests else 0.0
        return LoadPlan(
            target=CANARY_FIRST_STAGE,
            share_now=min(rollout.percentage, mirrored),
            share_next=canary_stage(stages),
            segment_rate_per_s=baseline_requests / seconds,
        )
    share_next = next_stage(stages, rollout.percentage)
    if share_next >= 100.0:
        share_next = holdout_share(thresholds)
    return LoadPlan(
        target=NEXT_STAGE,
        share_now=spec_share(rollout),
        share_next=share_next,
        segment_rate_per_s=(spec_requests + baseline_requests) / seconds,
    )


def _slots(
    spec_rows: list[WindowArrays], base_rows: list[WindowArrays]
) -> tuple[list[datetime], dict[datetime, int]]:
    starts = sorted({r.window_start for r in spec_rows} | {r.window_start for r in base_rows})
    return starts, {s: i for i, s in enumerate(starts)}


def gather_evidence(
    session: Session,
    rollout: Rollout,
    settings: ControlSettings,
    *,
    until: datetime,
    spec_workers: int,
) -> Evidence:
    thresholds = rollout.threshold_set
    exposed = rollout.exposed_since or rollout.state_entered_at
    since = max(exposed, until - timedelta(seconds=settings.monitor_lookback_seconds))
    spec_ids, spec_rows = repository.arm_windows(session, rollout, Arm.SPEC, since, until)
    base_ids, base_rows = repository.arm_windows(session, rollout, Arm.BASELINE, since, until)
    starts, slot_of = _slots(spec_rows, base_rows)
    spec = build_panel(slot_of, len(starts), spec_rows)
    base = build_panel(slot_of, len(starts), base_rows)
    stage_first = next(
        (i for i, s in enumerate(starts) if s >= rollout.state_entered_at), len(starts)
    )
    window_seconds = max((w.window_seconds for w in [*spec_rows, *base_rows]), default=10)
    builder = _Builder(
        rollout, thresholds, spec, base, starts, stage_first, spec_workers, window_seconds
    )
    return builder.evidence(
        exposed_since=since,
        until=until,
        spec_ids=spec_ids,
        base_ids=base_ids,
    )


class _Builder:
    """Computes every statistic of one evaluation from the two panels."""

    def __init__(
        self,
        rollout: Rollout,
        thresholds: ThresholdSet,
        spec: ArmPanel,
        base: ArmPanel,
        starts: list[datetime],
        stage_first: int,
        spec_workers: int,
        window_seconds: float,
    ) -> None:
        self.rollout, self.t = rollout, thresholds
        self.spec, self.base = spec, base
        self.starts, self.stage_first = starts, stage_first
        self.spec_workers = spec_workers
        self.window_seconds = window_seconds
        self.missing: list[str] = []
        self.blocks: dict[str, list[tuple[float, float, int, int]]] = {}
        self.variances = {
            m: (
                pooled_log_variance(spec.moments[:, :, m]),
                pooled_log_variance(base.moments[:, :, m]),
            )
            for m in range(len(METRICS))
        }

    def evidence(
        self, *, exposed_since: datetime, until: datetime, spec_ids: list[int], base_ids: list[int]
    ) -> Evidence:
        t = self.t
        acceptance, monitor = self._acceptance()
        latency = self._latency_guard()
        errors = self._error_guard()
        stage = {METRICS[m]: c for m in range(len(METRICS)) if (c := self._stage(m, 0)) is not None}
        next_stage_ = self._next_stage()
        spent = {
            "acceptance": _spent(monitor.blocks if monitor else 0, t, family_alpha(t)),
            "latency": latency.cusum.budget_spent if latency else 0.0,
            "errors": errors.cusum.budget_spent if errors else 0.0,
        }
        return Evidence(
            exposed_since=exposed_since,
            stage_since=self.rollout.state_entered_at,
            until=until,
            thresholds=ThresholdRef(id=t.id, name=t.name, version=t.version),
            budget=Budget(
                false_alarm_rate=t.false_alarm_rate,
                horizon_windows=t.false_alarm_horizon_windows,
                per_family=family_alpha(t),
                promotion_per_stage=promotion_alpha(t, list(self.rollout.stages)),
                spent=spent,
            ),
            spec=ArmSummary(
                window_ids=spec_ids,
                requests=int(self.spec.requests.sum()),
                errors=int(self.spec.errors.sum()),
                mean_load=self.spec.mean_load(),
            ),
            baseline=ArmSummary(
                window_ids=base_ids,
                requests=int(self.base.requests.sum()),
                errors=int(self.base.errors.sum()),
                mean_load=self.base.mean_load(),
            ),
            acceptance=acceptance,
            acceptance_monitor=monitor,
            latency_guard=latency,
            error_guard=errors,
            stage=stage,
            ttft_ratio=self._ttft_ratio(),
            p95_ratio=self._p95_ratio(),
            next_stage=next_stage_,
            saturation=self._saturation(),
            blocks=self.blocks,
            missing=self.missing,
        )

    # -- monitors (since the exposure began) -------------------------------------------

    def _acceptance(self) -> tuple[AcceptanceEstimate | None, AcceptanceMonitor | None]:
        if int(self.spec.drafts.sum()) == 0:
            self.missing.append("no drafts in the spec arm")
            return None, None
        try:
            estimate = estimate_acceptance(self.spec.acceptance_counts())
        except StatsError as exc:
            self.missing.append(f"acceptance: {exc}")
            return None, None
        if int(self.spec.acceptance[:, 0].sum()) == 0:
            self.missing.append("no per-request acceptance moments in the spec arm")
            return estimate, None
        monitor = monitor_acceptance(
            self.spec,
            sprt_config(self.t),
            horizon_blocks=self.t.false_alarm_horizon_windows,
            min_block_requests=self.t.min_block_requests,
        )
        return estimate, monitor

    def _latency_guard(self) -> LatencyGuard | None:
        blocks = self._latency_blocks(E2E_PER_TOKEN, first=0, min_bucket=0)
        if blocks is None:
            return None
        self.blocks["latency"] = [_block_tuple(b) for b in blocks]
        margin = math.log1p(self.t.latency_margin)
        cusum = gaussian_cusum(
            blocks,
            null_value=margin,
            shifts=[margin * k for k in SHIFT_MULTIPLES],
            alpha=family_alpha(self.t),
            horizon_blocks=self.t.false_alarm_horizon_windows,
        )
        return LatencyGuard(metric="e2e_per_token", margin=self.t.latency_margin, cusum=cusum)

    def _error_guard(self) -> ErrorGuard | None:
        spec_n, base_n = int(self.spec.requests.sum()), int(self.base.requests.sum())
        if spec_n == 0 or base_n == 0:
            self.missing.append("errors: no requests in one of the arms")
            return None
        base_rate = int(self.base.errors.sum()) / base_n
        margin = max(self.t.error_rate_margin, self.t.error_rate_relative_margin * base_rate)
        blocks = error_blocks(self.spec, self.base, min_requests=self.t.min_block_requests)
        self.blocks["errors"] = [_block_tuple(b) for b in blocks]
        cusum = gaussian_cusum(
            blocks,
            null_value=margin,
            shifts=[margin * k for k in SHIFT_MULTIPLES],
            alpha=family_alpha(self.t),
            horizon_blocks=self.t.false_alarm_horizon_windows,
        )
        stage_blocks = error_blocks(
            self.spec, self.base, min_requests=self.t.min_block_requests, first=self.stage_first
        )
        return ErrorGuard(
            margin=margin,
            spec_rate=int(self.spec.errors.sum()) / spec_n,
            baseline_rate=base_rate,
            cusum=cusum,
            stage=confidence_sequence(
                stage_blocks,
                alpha=promotion_alpha(self.t, list(self.rollout.stages)),
                mixture_scale=ERROR_MIXTURE_SCALE,
            ),
        )

    def _saturation(self) -> Saturation:
        load = self.spec.load[-SATURATION_WINDOWS:]  # [w, fields]
        waiting = [
            float(row[3] / row[0]) if row[0] > 0 else 0.0 for row in load
        ]  # mean engine waiting at dispatch
        # NOTE: a queue that grows in every one of the last windows and has at least
        # doubled to two or more waiting requests: the pool takes in more than it serves.
        growing = len(waiting) == SATURATION_WINDOWS and all(
            b > a for a, b in itertools.pairwise(waiting)
        )
        saturated = growing and waiting[-1] >= 2.0 and waiting[-1] >= 2 * waiting[0]
        return Saturation(recent_waiting=waiting, saturated=saturated)

    # -- stage evidence (since the current stage began) ---------------------------------

    def _latency_blocks(
        self, metric: int, first: int, min_bucket: int
    ) -> list[BlockEstimate] | None:
        spec_var, base_var = self.variances[metric]
        if spec_var is None or base_var is None:
            self.missing.append(f"{METRICS[metric]}: too few latency samples in one of the arms")
            return None
        return latency_blocks(
            self.spec,
            self.base,
            metric,
            min_requests=self.t.min_block_requests,
            spec_variance=spec_var,
            baseline_variance=base_var,
            min_bucket=min_bucket,
            first=first,
        )

    def _stage(self, metric: int, min_bucket: int) -> StageComparison | None:
        blocks = self._latency_blocks(metric, self.stage_first, min_bucket)
        if not blocks:
            return None
        cs = confidence_sequence(
            blocks,
            alpha=promotion_alpha(self.t, list(self.rollout.stages)),
            mixture_scale=MIXTURE_SCALE,
        )
        assert cs is not None
        return _comparison(METRICS[metric], cs, self._matched_counts(metric, min_bucket))

    def _matched_counts(self, metric: int, min_bucket: int) -> tuple[int, int]:
        s = self.spec.moments[self.stage_first :, :, metric].sum(axis=0)
        b = self.base.moments[self.stage_first :, :, metric].sum(axis=0)
        spec_var, base_var = self.variances[metric]
        diff = matched_difference(s, b, spec_var or 1.0, base_var or 1.0, min_bucket)
        return (diff.spec_requests, diff.baseline_requests) if diff else (0, 0)

    def _ttft_ratio(self) -> float | None:
        s = self.spec.moments[self.stage_first :, :, TTFT].sum(axis=0)
        b = self.base.moments[self.stage_first :, :, TTFT].sum(axis=0)
        spec_var, base_var = self.variances[TTFT]
        diff = matched_difference(s, b, spec_var or 1.0, base_var or 1.0)
        return math.exp(diff.estimate) if diff else None

    def _p95_ratio(self) -> float | None:
        s = self.spec.counts[self.stage_first :, :, E2E_PER_TOKEN].sum(axis=0)
        b = self.base.counts[self.stage_first :, :, E2E_PER_TOKEN].sum(axis=0)
        quantiles = matched_quantile_ratio(s, b, 0.95)
        if quantiles is None or quantiles[1] <= 0:
            return None
        return quantiles[0] / quantiles[1]

    def _next_stage(self) -> NextStage | None:
        r = self.rollout
        if r.state == RolloutState.FULL.value:
            return None
        first = self.stage_first
        if first >= len(self.starts):
            self.missing.append("no windows since the stage began")
            return None
        span = self.starts[first:]
        seconds = (span[-1] - span[0]).total_seconds() + self.window_seconds
        plan = load_plan(
            r,
            self.t,
            spec_requests=int(self.spec.requests[first:].sum()),
            baseline_requests=int(self.base.requests[first:].sum()),
            seconds=seconds,
        )
        e2e = self.spec.e2e_ms[first:].sum(axis=0)  # [samples, sum ms]
        load_now = self.spec.mean_load(first)
        if load_now is None or e2e[0] == 0:
            self.missing.append(f"{plan.target}: no dispatched spec requests in this stage")
            return None
        load_next = projected_spec_load(
            load_now=load_now,
            share_now=plan.share_now,
            share_next=plan.share_next,
            segment_rate_per_s=plan.segment_rate_per_s,
            spec_latency_s=float(e2e[1] / e2e[0]) / 1000.0,
            spec_workers=self.spec_workers,
        )
        bucket = load_bucket(int(load_next))
        speedup = self._stage(E2E_PER_TOKEN, bucket)
        advice = None
        if speedup is None or speedup.spec_requests < self.t.min_samples:
            have = speedup.spec_requests if speedup else 0
            remedy = (
                "add spec workers or raise the shadow share (shadow_percentage) towards the "
                "canary's first stage"
                if plan.target == CANARY_FIRST_STAGE
                else "add spec workers or promote in smaller steps"
            )
            advice = (
                f"no evidence at the {plan.target}'s load: the spec pool would carry "
                f"{load_next:.1f} requests per worker at {plan.share_next:g} %, and this stage "
                f"has {have} matched spec requests at load >= {LOAD_BUCKET_EDGES[bucket]} "
                f"(needs {self.t.min_samples}); {remedy}"
            )
        return NextStage(
            target=plan.target,
            share_now=plan.share_now,
            share_next=plan.share_next,
            segment_rate_per_s=plan.segment_rate_per_s,
            spec_workers=self.spec_workers,
            spec_load_now=load_now,
            spec_load_next=load_next,
            load_bucket=bucket,
            load_floor=LOAD_BUCKET_EDGES[bucket],
            speedup=speedup,
            advice=advice,
        )


def _comparison(metric: str, cs: ConfidenceSequence, counts: tuple[int, int]) -> StageComparison:
    # NOTE: the interval is on log(spec) - log(base); the speedup is its negative's exp.
    return StageComparison(
        metric=metric,
        speedup=math.exp(-cs.estimate),
        lower=math.exp(-cs.upper),
        upper=math.exp(-cs.lower),
        log_difference=cs.estimate,
        spec_requests=counts[0],
        baseline_requests=counts[1],
        blocks=cs.blocks,
    )


def _spent(blocks: int, thresholds: ThresholdSet, alpha: float) -> float:
    return min(blocks / thresholds.false_alarm_horizon_windows, 1.0) * alpha


def _block_tuple(block: BlockEstimate) -> tuple[float, float, int, int]:
    return (block.estimate, block.variance, block.first_slot, block.last_slot)
