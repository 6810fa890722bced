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

import numpy as np
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
    monitor_acceptance,
    projected_spec_load,
)
from control.stats.load_model import (
    LoadLine,
    SlopePair,
    adjusted_blocks,
    adjusted_quantile,
    arm_cells,
    fit_line,
    joint_slopes,
    slope_bias,
)
from control.stats.panel import LOG_MIDPOINTS, METRICS, WindowArrays

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
# Level of the error-rate non-inferiority bound promotion needs: the chance that a pair
# whose errors are worse than the margin ever passes this check, per stage, is at most
# this (the error CUSUM keeps watching after). NOTE: not the promotion family's share of
# the false-alarm budget (about 0.0005 at the defaults): at that level a 1 % canary of
# 200 requests/s would need ~4,000 spec requests to show "not worse by 1 point".
NONINFERIORITY_ALPHA = 0.05
SATURATION_WINDOWS = 4
# Promotion also reads the latest windows on their own (`Recent`).
RECENT_SLOTS = 2
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
    """Latency of one metric over the current stage, both arms read at one load (each
    arm's line over load, `control.stats.load_model`): speedup = base / spec. The
    interval is the blocks' always-valid interval widened by `slope_bias`, the bound on
    what the slopes' errors can add over the distances they were applied."""

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
    # along its line, and the bound on its slope's error over that distance raises the
    # CUSUM's null (margin + slope_bias, in log units).
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
    # Since the exposure began (error rates do not depend on load), at NONINFERIORITY_ALPHA:
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
        assert spec.slots == base.slots == len(starts), (spec.slots, base.slots, len(starts))
        assert 0 <= stage_first <= len(starts), (stage_first, len(starts))
        self.rollout, self.t = rollout, thresholds
        self.spec, self.base = spec, base
        self.starts, self.stage_first = starts, stage_first
        self.spec_workers = spec_workers
        self.window_seconds = window_seconds
        self.missing: list[str] = []
        self.blocks: dict[str, list[tuple[float, float, int, int]]] = {}
        # Each arm's line over load per metric, fitted on everything read since the
        # exposure began: the loads of earlier stages are what pins a slope.
        self.lines = {m: self._lines(m) for m in range(len(METRICS))}

    def _lines(self, metric: int) -> tuple[LoadLine, LoadLine, SlopePair] | None:
        spec_line = fit_line(arm_cells(self.spec, metric))
        base_line = fit_line(arm_cells(self.base, metric))
        if spec_line is None or base_line is None:
            return None
        return spec_line, base_line, joint_slopes(spec_line, base_line)

    def evidence(
        self, *, exposed_since: datetime, until: datetime, spec_ids: list[int], base_ids: list[int]
    ) -> Evidence:
        t = self.t
        acceptance, monitor = self._acceptance()
        latency = self._latency_guard()
        errors = self._error_guard()
        stage = {
            METRICS[m]: c for m in range(len(METRICS)) if (c := self._stage(m, None)) is not None
        }
        next_stage_ = self._next_stage()
        at = next_stage_.spec_load_next if next_stage_ is not None else None
        ttft = self._stage(TTFT, at) if at is not None else stage.get("ttft")
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
            spec=_arm_summary(self.spec, spec_ids),
            baseline=_arm_summary(self.base, base_ids),
            acceptance=acceptance,
            acceptance_monitor=monitor,
            latency_guard=latency,
            error_guard=errors,
            stage=stage,
            ttft_ratio=1 / ttft.speedup if ttft else None,
            ttft_ratio_upper=1 / ttft.lower if ttft and ttft.lower > 0 else None,
            p95_ratio=self._p95_ratio(at),
            recent=self._recent(),
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
        lines = self._metric_lines(E2E_PER_TOKEN)
        if lines is None:
            return None
        adjusted = adjusted_blocks(
            arm_cells(self.spec, E2E_PER_TOKEN),
            arm_cells(self.base, E2E_PER_TOKEN),
            *lines,
            min_requests=self.t.min_block_requests,
            target_load=None,
        )
        self.blocks["latency"] = [_block_tuple(b) for b in adjusted.blocks]
        alpha = family_alpha(self.t)
        bias = slope_bias(lines[2], adjusted, alpha) if adjusted.blocks else 0.0
        margin = math.log1p(self.t.latency_margin)
        cusum = gaussian_cusum(
            adjusted.blocks,
            null_value=margin + bias,
            shifts=[margin * k for k in SHIFT_MULTIPLES],
            alpha=alpha,
            horizon_blocks=self.t.false_alarm_horizon_windows,
        )
        return LatencyGuard(
            metric="e2e_per_token",
            margin=self.t.latency_margin,
            cusum=cusum,
            spec_load=adjusted.spec_load,
            baseline_load=adjusted.baseline_load,
            slope_bias=bias,
        )

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
            # NOTE: the mixture is tightest at the margin, where the bound must land.
            noninferiority=confidence_sequence(
                blocks, alpha=NONINFERIORITY_ALPHA, mixture_scale=margin
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

    def _metric_lines(self, metric: int) -> tuple[LoadLine, LoadLine, SlopePair] | None:
        lines = self.lines[metric]
        if lines is None:
            self.missing.append(f"{METRICS[metric]}: too few latency samples in one of the arms")
        return lines

    def _stage(self, metric: int, target_load: float | None) -> StageComparison | None:
        """This stage's blocks, both arms read at `target_load` (None: at the spec arm's
        own load, i.e. "does it pay where it runs now")."""
        lines = self._metric_lines(metric)
        if lines is None:
            return None
        first = self.stage_first
        spec_cells = arm_cells(self.spec, metric, first)
        base_cells = arm_cells(self.base, metric, first)
        adjusted = adjusted_blocks(
            spec_cells,
            base_cells,
            *lines,
            min_requests=self.t.min_block_requests,
            target_load=target_load,
            first_slot=first,
        )
        if not adjusted.blocks:
            return None
        # NOTE: the promotion budget is split: half for the blocks' interval, half for the
        # bound on the slopes' errors (union bound).
        alpha = promotion_alpha(self.t, list(self.rollout.stages))
        cs = confidence_sequence(adjusted.blocks, alpha=alpha / 2, mixture_scale=MIXTURE_SCALE)
        assert cs is not None
        bias = slope_bias(lines[2], adjusted, alpha / 2)
        return StageComparison(
            metric=METRICS[metric],
            speedup=math.exp(-cs.estimate),
            lower=math.exp(-(cs.upper + bias)),
            upper=math.exp(-(cs.lower - bias)),
            log_difference=cs.estimate,
            spec_requests=spec_cells.requests,
            baseline_requests=base_cells.requests,
            blocks=cs.blocks,
            at_load=target_load,
            spec_load=adjusted.spec_load,
            baseline_load=adjusted.baseline_load,
            slope_bias=bias,
        )

    def _p95_ratio(self, target_load: float | None) -> float | None:
        """Both arms' p95 of end-to-end time per token over this stage, each moved along its
        line to `target_load` (None: the spec arm's mean load this stage)."""
        lines = self.lines[E2E_PER_TOKEN]
        if lines is None:
            return None
        first = self.stage_first
        spec_cells = arm_cells(self.spec, E2E_PER_TOKEN, first)
        if spec_cells.requests == 0:
            return None
        target = target_load
        if target is None:
            target = float(np.sum(spec_cells.n * spec_cells.load) / spec_cells.requests)
        quantiles = []
        for panel, slope in ((self.spec, lines[2].spec), (self.base, lines[2].baseline)):
            cells = arm_cells(panel, E2E_PER_TOKEN, first)
            q = adjusted_quantile(
                panel.counts[first:, :, E2E_PER_TOKEN],
                cells.load,
                LOG_MIDPOINTS,
                slope,
                target,
                0.95,
            )
            if q is None:
                return None
            quantiles.append(q)
        return math.exp(quantiles[0] - quantiles[1])

    def _recent(self) -> Recent | None:
        """The last RECENT_SLOTS slots with requests in both arms, as one block."""
        both = np.flatnonzero((self.spec.requests > 0) & (self.base.requests > 0))
        if len(both) == 0:
            return None
        first = int(both[-min(RECENT_SLOTS, len(both))])
        log_diff = log_se = None
        lines = self.lines[E2E_PER_TOKEN]
        if lines is not None:
            adjusted = adjusted_blocks(
                arm_cells(self.spec, E2E_PER_TOKEN, first),
                arm_cells(self.base, E2E_PER_TOKEN, first),
                *lines,
                min_requests=1,
                target_load=None,
            )
            cs = confidence_sequence(adjusted.blocks, alpha=0.5, mixture_scale=MIXTURE_SCALE)
            if cs is not None:
                log_diff, log_se = cs.estimate, math.sqrt(1 / cs.information)
        ns, nb = int(self.spec.requests[first:].sum()), int(self.base.requests[first:].sum())
        rs = float(self.spec.errors[first:].sum() + 1) / (ns + 2)
        rb = float(self.base.errors[first:].sum() + 1) / (nb + 2)
        return Recent(
            slots=len(self.starts) - first,
            log_difference=log_diff,
            log_difference_se=log_se,
            error_difference=int(self.spec.errors[first:].sum()) / ns
            - int(self.base.errors[first:].sum()) / nb,
            error_difference_se=math.sqrt(rs * (1 - rs) / ns + rb * (1 - rb) / nb),
        )

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
        spec_latency_s = float(e2e[1] / e2e[0]) / 1000.0
        load_next = projected_spec_load(
            load_now=load_now,
            share_now=plan.share_now,
            share_next=plan.share_next,
            segment_rate_per_s=plan.segment_rate_per_s,
            spec_latency_s=spec_latency_s,
            spec_workers=self.spec_workers,
        )
        lines = self.lines[E2E_PER_TOKEN]
        readable = None
        if lines is not None:
            low = max(line.readable[0] for line in lines[:2])
            high = min(line.readable[1] for line in lines[:2])
            readable = (max(low, 0.0), high)
        reachable = readable is not None and readable[0] <= load_next <= readable[1]
        speedup = self._stage(E2E_PER_TOKEN, load_next) if reachable else None
        reachable_share = None
        if readable is not None and load_next > readable[1]:
            extra_per_share = (
                plan.segment_rate_per_s * spec_latency_s / 100 / max(self.spec_workers, 1)
            )
            if extra_per_share > 0:
                reachable_share = plan.share_now + (readable[1] - load_now) / extra_per_share
        advice = self._advice(plan, load_next, speedup, readable, reachable_share)
        return NextStage(
            target=plan.target,
            share_now=plan.share_now,
            share_next=plan.share_next,
            segment_rate_per_s=plan.segment_rate_per_s,
            spec_workers=self.spec_workers,
            spec_load_now=load_now,
            spec_load_next=load_next,
            load_bucket=load_bucket(int(load_next)),
            load_floor=LOAD_BUCKET_EDGES[load_bucket(int(load_next))],
            speedup=speedup,
            advice=advice,
            readable_loads=readable,
            reachable_share=reachable_share,
        )

    def _advice(
        self,
        plan: LoadPlan,
        load_next: float,
        speedup: StageComparison | None,
        readable: tuple[float, float] | None,
        reachable_share: float | None,
    ) -> str | None:
        """Why the next stage cannot be judged yet, and what would make it judgeable."""
        where = (
            f"the spec pool would carry {load_next:.1f} requests per worker at "
            f"{plan.share_next:g} %"
        )
        if readable is None:
            return None  # the missing latency samples are listed already
        low, high = readable
        if load_next > high:
            step = (
                f"promote in a smaller step (a stage at or below {reachable_share:.1f} %)"
                if reachable_share is not None and reachable_share > plan.share_now
                else "promote in smaller steps"
            )
            return (
                f"no evidence at the {plan.target}'s load: {where}, beyond what the arms' "
                f"loads so far let the comparison read (up to {high:.1f}); {step}, or add "
                f"spec workers"
                if plan.target == NEXT_STAGE
                else f"no evidence at the {plan.target}'s load: {where}, beyond what the "
                f"mirrored load lets the comparison read (up to {high:.1f}); raise the shadow "
                f"share (shadow_percentage) towards the canary's first stage"
            )
        if load_next < low:
            return (
                f"no evidence at the {plan.target}'s load: {where}, below the loads the "
                f"baseline arm was seen at (from {low:.1f}); add baseline workers, or give the "
                f"baseline pool's requests to fewer workers, so that its load reaches "
                f"{load_next:.1f}"
            )
        have = speedup.spec_requests if speedup else 0
        if have < self.t.min_samples:
            return (
                f"not enough evidence at the {plan.target}'s load yet: {where}; this stage "
                f"has {have} spec requests (needs {self.t.min_samples})"
            )
        return None


def _arm_summary(panel: ArmPanel, window_ids: list[int]) -> ArmSummary:
    return ArmSummary(
        window_ids=window_ids,
        requests=int(panel.requests.sum()),
        errors=int(panel.errors.sum()),
        mean_load=panel.mean_load(),
    )


def _spent(blocks: int, thresholds: ThresholdSet, alpha: float) -> float:
    return min(blocks / thresholds.false_alarm_horizon_windows, 1.0) * alpha


def _block_tuple(block: BlockEstimate) -> tuple[float, float, int, int]:
    return (block.estimate, block.variance, block.first_slot, block.last_slot)
