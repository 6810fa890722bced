"""Gathering: a rollout's telemetry windows of both arms turned into `Evidence`.

Two spans of windows are read:

- **Since the exposure began** (`Rollout.exposed_since`, capped at
  `monitor_lookback_s`): the sequential monitors that can flip a
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

Each statistic is one function of the two arms (`Arms`) that returns its value
and the reasons it could not be computed; `build_evidence` calls them in one
order and lists those reasons in `Evidence.missing` in that order.
"""

import itertools
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from sqlalchemy.orm import Session

from control.automation import repository
from control.automation.budget import (
    NONINFERIORITY_ALPHA,
    family_alpha,
    promotion_alpha,
    spent,
    sprt_config,
)
from control.automation.contract import ContractGuard, contract_guard
from control.automation.evidence import (
    ArmSummary,
    Budget,
    ErrorGuard,
    Evidence,
    LatencyGuard,
    NextStage,
    Recent,
    Saturation,
    StageComparison,
    ThresholdRef,
)
from control.automation.load_plan import NEXT_STAGE, LoadPlan, load_plan
from control.models import Rollout, ThresholdSet
from control.settings import ControlSettings
from control.stats import (
    AcceptanceEstimate,
    AcceptanceMonitor,
    ArmPanel,
    BlockEstimate,
    SpecFlow,
    StatsError,
    build_panel,
    confidence_sequence,
    error_blocks,
    estimate_acceptance,
    gaussian_cusum,
    monitor_acceptance,
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
from specwire import LOAD_BUCKET_EDGES, Arm, RolloutState, load_bucket

E2E_PER_TOKEN, TTFT, TPOT = (METRICS.index(m) for m in ("e2e_per_token", "ttft", "tpot"))
# Design shifts of the CUSUMs, as multiples of the margin: the size of a real
# regression is unknown, so several run side by side (Bonferroni over them).
SHIFT_MULTIPLES = (0.25, 0.5, 1.0, 2.0, 4.0)
# Scale (in log-latency units) of the normal mixture behind the promotion interval:
# it is tightest for effects of about this size (10 %).
MIXTURE_SCALE = 0.1
# ... and of the error-rate difference's interval: tightest around 5 points.
ERROR_MIXTURE_SCALE = 0.05
SATURATION_WINDOWS = 4
# Promotion also reads the latest windows on their own (`Recent`).
RECENT_SLOTS = 2

Lines = tuple[LoadLine, LoadLine, SlopePair]  # spec's line, baseline's line, their slopes
BlockTuple = tuple[float, float, int, int]  # estimate, variance, first slot, last slot
Missing = list[str]


def gather_evidence(
    session: Session,
    rollout: Rollout,
    settings: ControlSettings,
    *,
    until: datetime,
    spec_workers: int,
) -> Evidence:
    """Read both arms' windows since the exposure began and compute every statistic."""
    exposed = rollout.exposed_since or rollout.state_entered_at
    since = max(exposed, until - timedelta(seconds=settings.automation.monitor_lookback_s))
    spec_ids, spec_rows = repository.arm_windows(session, rollout, Arm.SPEC, since, until)
    base_ids, base_rows = repository.arm_windows(session, rollout, Arm.BASELINE, since, until)
    starts, slot_of = _slots(spec_rows, base_rows)
    spec = build_panel(slot_of, len(starts), spec_rows)
    base = build_panel(slot_of, len(starts), base_rows)
    stage_first = next(
        (i for i, s in enumerate(starts) if s >= rollout.state_entered_at), len(starts)
    )
    window_seconds = max((w.window_seconds for w in [*spec_rows, *base_rows]), default=10)
    arms = Arms.of(rollout, spec, base, starts, stage_first, spec_workers, window_seconds)
    contract = contract_guard(
        repository.contract_counts(session, rollout, since, until),
        rollout.threshold_set,
        family_alpha(rollout.threshold_set),
    )
    return build_evidence(
        arms,
        exposed_since=since,
        until=until,
        spec_ids=spec_ids,
        base_ids=base_ids,
        contract=contract,
    )


def _slots(
    spec_rows: list[WindowArrays], base_rows: list[WindowArrays]
) -> tuple[list[datetime], dict[datetime, int]]:
    starts = sorted({r.window_start for r in spec_rows} | {r.window_start for r in base_rows})
    return starts, {s: i for i, s in enumerate(starts)}


@dataclass(frozen=True)
class Arms:
    """Both arms of one evaluation over the same T slots, and what every statistic reads."""

    rollout: Rollout
    t: ThresholdSet
    spec: ArmPanel  # T slots
    base: ArmPanel  # T slots
    starts: list[datetime]  # [T] window start of each slot
    stage_first: int  # the first slot of the current stage (T: none yet)
    spec_workers: int
    window_seconds: float
    # Each arm's line over load per metric, fitted on everything read since the
    # exposure began: the loads of earlier stages are what pins a slope.
    lines: dict[int, Lines | None]

    def __post_init__(self) -> None:
        assert self.spec.slots == self.base.slots == len(self.starts), (
            self.spec.slots,
            self.base.slots,
            len(self.starts),
        )
        assert 0 <= self.stage_first <= len(self.starts), (self.stage_first, len(self.starts))
        assert set(self.lines) == set(range(len(METRICS))), sorted(self.lines)

    @classmethod
    def of(
        cls,
        rollout: Rollout,
        spec: ArmPanel,
        base: ArmPanel,
        starts: list[datetime],
        stage_first: int,
        spec_workers: int,
        window_seconds: float,
    ) -> "Arms":
        lines = {m: _fit_lines(spec, base, m) for m in range(len(METRICS))}
        return cls(
            rollout,
            rollout.threshold_set,
            spec,
            base,
            starts,
            stage_first,
            spec_workers,
            window_seconds,
            lines,
        )


def _fit_lines(spec: ArmPanel, base: ArmPanel, metric: int) -> Lines | None:
    spec_line = fit_line(arm_cells(spec, metric))
    base_line = fit_line(arm_cells(base, metric))
    if spec_line is None or base_line is None:
        return None
    return spec_line, base_line, joint_slopes(spec_line, base_line)


def build_evidence(
    arms: Arms,
    *,
    exposed_since: datetime,
    until: datetime,
    spec_ids: list[int],
    base_ids: list[int],
    contract: ContractGuard | None = None,
) -> Evidence:
    """Every statistic of one evaluation; `missing` lists, in this order, why any is None."""
    t, rollout = arms.t, arms.rollout
    missing: Missing = []
    acceptance, monitor, why = acceptance_evidence(arms)
    missing += why
    latency, latency_blocks, why = latency_guard(arms)
    missing += why
    errors, errors_blocks, why = error_guard(arms)
    missing += why
    stage: dict[str, StageComparison] = {}
    for m in range(len(METRICS)):
        comparison, why = stage_comparison(arms, m, None)
        missing += why
        if comparison is not None:
            stage[METRICS[m]] = comparison
    next_stage_, why = next_stage_evidence(arms)
    missing += why
    at = next_stage_.spec_load_next if next_stage_ is not None else None
    ttft, why = ttft_evidence(arms, next_stage_, stage.get("ttft"))
    missing += why
    blocks: dict[str, list[BlockTuple]] = {}
    if latency_blocks is not None:
        blocks["latency"] = latency_blocks
    if errors_blocks is not None:
        blocks["errors"] = errors_blocks
    return Evidence(
        exposed_since=exposed_since,
        stage_since=rollout.state_entered_at,
        until=until,
        thresholds=ThresholdRef(id=t.id, name=t.name, version=t.version),
        budget=Budget(
            false_alarm_rate=t.false_alarm_rate,
            horizon_windows=t.false_alarm_horizon_windows,
            per_family=family_alpha(t),
            promotion_per_stage=promotion_alpha(t, list(rollout.stages)),
            spent={
                "acceptance": spent(monitor.blocks if monitor else 0, t, family_alpha(t)),
                "latency": latency.cusum.budget_spent if latency else 0.0,
                "errors": errors.cusum.budget_spent if errors else 0.0,
            },
        ),
        spec=_arm_summary(arms.spec, spec_ids),
        baseline=_arm_summary(arms.base, base_ids),
        acceptance=acceptance,
        acceptance_monitor=monitor,
        latency_guard=latency,
        error_guard=errors,
        stage=stage,
        ttft_ratio=1 / ttft.speedup if ttft else None,
        ttft_ratio_upper=1 / ttft.lower if ttft and ttft.lower > 0 else None,
        p95_ratio=p95_ratio(arms, at),
        recent=recent_windows(arms),
        next_stage=next_stage_,
        saturation=saturation(arms),
        output_contract=contract,
        blocks=blocks,
        missing=missing,
    )


# -- monitors (since the exposure began) -----------------------------------------------


def acceptance_evidence(
    arms: Arms,
) -> tuple[AcceptanceEstimate | None, AcceptanceMonitor | None, Missing]:
    """The pooled acceptance estimate and the SPRT-CUSUM with the request as unit."""
    spec, t = arms.spec, arms.t
    if int(spec.drafts.sum()) == 0:
        return None, None, ["no drafts in the spec arm"]
    try:
        estimate = estimate_acceptance(spec.acceptance_counts())
    except StatsError as exc:
        return None, None, [f"acceptance: {exc}"]
    if int(spec.acceptance[:, 0].sum()) == 0:
        return estimate, None, ["no per-request acceptance moments in the spec arm"]
    monitor = monitor_acceptance(
        spec,
        sprt_config(t),
        horizon_blocks=t.false_alarm_horizon_windows,
        min_block_requests=t.min_block_requests,
    )
    return estimate, monitor, []


def latency_guard(arms: Arms) -> tuple[LatencyGuard | None, list[BlockTuple] | None, Missing]:
    """The load-matched latency CUSUM on end-to-end time per token, and its blocks."""
    lines, why = metric_lines(arms, E2E_PER_TOKEN)
    if lines is None:
        return None, None, why
    t = arms.t
    adjusted = adjusted_blocks(
        arm_cells(arms.spec, E2E_PER_TOKEN),
        arm_cells(arms.base, E2E_PER_TOKEN),
        *lines,
        min_requests=t.min_block_requests,
        target_load=None,
    )
    alpha = family_alpha(t)
    # NOTE: without the straightness allowance: a latency linear in load bends ln latency
    # so that a busy baseline moved down to the spec arm's load reads too slow, which
    # hides a regression rather than inventing one (with it, +25 % at a 5 % canary on
    # one worker per pool went undetected in 11 of 12 runs).
    bias = slope_bias(lines[2], adjusted, alpha, curvature=False) if adjusted.blocks else 0.0
    margin = math.log1p(t.latency_margin)
    cusum = gaussian_cusum(
        adjusted.blocks,
        null_value=margin + bias,
        shifts=[margin * k for k in SHIFT_MULTIPLES],
        alpha=alpha,
        horizon_blocks=t.false_alarm_horizon_windows,
    )
    guard = LatencyGuard(
        metric="e2e_per_token",
        margin=t.latency_margin,
        cusum=cusum,
        spec_load=adjusted.spec_load,
        baseline_load=adjusted.baseline_load,
        slope_bias=bias,
    )
    return guard, [_block_tuple(b) for b in adjusted.blocks], []


def error_guard(arms: Arms) -> tuple[ErrorGuard | None, list[BlockTuple] | None, Missing]:
    """The error-rate CUSUM, this stage's interval and the non-inferiority bound."""
    spec, base, t = arms.spec, arms.base, arms.t
    spec_n, base_n = int(spec.requests.sum()), int(base.requests.sum())
    if spec_n == 0 or base_n == 0:
        return None, None, ["errors: no requests in one of the arms"]
    base_rate = int(base.errors.sum()) / base_n
    margin = max(t.error_rate_margin, t.error_rate_relative_margin * base_rate)
    blocks = error_blocks(spec, base, min_requests=t.min_block_requests)
    cusum = gaussian_cusum(
        blocks,
        null_value=margin,
        shifts=[margin * k for k in SHIFT_MULTIPLES],
        alpha=family_alpha(t),
        horizon_blocks=t.false_alarm_horizon_windows,
    )
    stage_blocks = error_blocks(
        spec, base, min_requests=t.min_block_requests, first=arms.stage_first
    )
    guard = ErrorGuard(
        margin=margin,
        spec_rate=int(spec.errors.sum()) / spec_n,
        baseline_rate=base_rate,
        cusum=cusum,
        stage=confidence_sequence(
            stage_blocks,
            alpha=promotion_alpha(t, list(arms.rollout.stages)),
            mixture_scale=ERROR_MIXTURE_SCALE,
        ),
        # NOTE: the mixture is tightest at the margin, where the bound must land.
        noninferiority=confidence_sequence(
            blocks, alpha=NONINFERIORITY_ALPHA, mixture_scale=margin, one_sided=True
        ),
    )
    return guard, [_block_tuple(b) for b in blocks], []


def saturation(arms: Arms) -> Saturation:
    load = arms.spec.load[-SATURATION_WINDOWS:]  # [w, LOAD_FIELDS]
    assert load.ndim == 2 and load.shape[1] >= 4, load.shape
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


# -- stage evidence (since the current stage began) -------------------------------------


def metric_lines(arms: Arms, metric: int) -> tuple[Lines | None, Missing]:
    lines = arms.lines[metric]
    if lines is None:
        return None, [f"{METRICS[metric]}: too few latency samples in one of the arms"]
    return lines, []


def stage_comparison(
    arms: Arms, metric: int, target_load: float | None
) -> tuple[StageComparison | None, Missing]:
    """This stage's blocks, both arms read at `target_load` (None: at the spec arm's
    own load, i.e. "does it pay where it runs now")."""
    lines, why = metric_lines(arms, metric)
    if lines is None:
        return None, why
    t, first = arms.t, arms.stage_first
    spec_cells = arm_cells(arms.spec, metric, first)
    base_cells = arm_cells(arms.base, metric, first)
    adjusted = adjusted_blocks(
        spec_cells,
        base_cells,
        *lines,
        min_requests=t.min_block_requests,
        target_load=target_load,
        first_slot=first,
    )
    if not adjusted.blocks:
        return None, []
    # NOTE: the promotion budget is split: half for the blocks' interval, half for the
    # bound on the slopes' errors (union bound).
    alpha = promotion_alpha(t, list(arms.rollout.stages))
    cs = confidence_sequence(adjusted.blocks, alpha=alpha / 2, mixture_scale=MIXTURE_SCALE)
    assert cs is not None
    bias = slope_bias(lines[2], adjusted, alpha / 2)
    comparison = StageComparison(
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
    return comparison, []


def within(readable: tuple[float, float] | None, load: float) -> bool:
    return readable is not None and readable[0] <= load <= readable[1]


def readable_loads(lines: Lines) -> tuple[float, float]:
    """The loads at which both arms' lines may be read (never below 0)."""
    low = max(line.readable[0] for line in lines[:2])
    high = min(line.readable[1] for line in lines[:2])
    return max(low, 0.0), high


def ttft_evidence(
    arms: Arms, next_stage: NextStage | None, here: StageComparison | None
) -> tuple[StageComparison | None, Missing]:
    """TTFT for promotion: at this stage's load at `full` (no next stage), else at the next
    stage's load where the end-to-end lines reach it.

    NOTE: beyond the end-to-end lines' range the next stage is not judged at all; its
    advice says why and which share could be, so TTFT adds no reason of its own."""
    if next_stage is None:
        return here, []
    if not within(next_stage.readable_loads, next_stage.spec_load_next):
        return None, []
    return ttft_at_next_stage(arms, next_stage.spec_load_next)


def ttft_at_next_stage(arms: Arms, load: float) -> tuple[StageComparison | None, Missing]:
    """TTFT read at the next stage's load, only where both arms' TTFT lines may be read
    (their own range, not the end-to-end lines' that the load was checked against)."""
    lines = arms.lines[TTFT]
    if lines is not None:
        low, high = readable_loads(lines)
        if not low <= load <= high:
            return None, [
                f"ttft: the next stage's load {load:.2f} lies beyond what the arms' TTFT "
                f"lines may be read at ({low:.2f}-{high:.2f})"
            ]
    return stage_comparison(arms, TTFT, load)


def p95_ratio(arms: Arms, target_load: float | None) -> float | None:
    """Both arms' p95 of end-to-end time per token over this stage, each moved along its
    line to `target_load` (None: the spec arm's mean load this stage)."""
    lines = arms.lines[E2E_PER_TOKEN]
    if lines is None:
        return None
    first = arms.stage_first
    spec_cells = arm_cells(arms.spec, E2E_PER_TOKEN, first)
    if spec_cells.requests == 0:
        return None
    target = target_load
    if target is None:
        target = float(np.sum(spec_cells.n * spec_cells.load) / spec_cells.requests)
    quantiles = []
    for panel, slope in ((arms.spec, lines[2].spec), (arms.base, lines[2].baseline)):
        cells = arm_cells(panel, E2E_PER_TOKEN, first)
        counts = panel.counts[first:, :, E2E_PER_TOKEN]  # [T', N_STRATA, N_BUCKETS]
        assert counts.shape[:2] == cells.load.shape, (counts.shape, cells.load.shape)
        q = adjusted_quantile(counts, cells.load, LOG_MIDPOINTS, slope, target, 0.95)
        if q is None:
            return None
        quantiles.append(q)
    return math.exp(quantiles[0] - quantiles[1])


def recent_windows(arms: Arms) -> Recent | None:
    """The last RECENT_SLOTS slots with requests in both arms, as one block."""
    spec, base = arms.spec, arms.base
    both = np.flatnonzero((spec.requests > 0) & (base.requests > 0))  # [slots with both]
    if len(both) == 0:
        return None
    first = int(both[-min(RECENT_SLOTS, len(both))])
    log_diff = log_se = None
    lines = arms.lines[E2E_PER_TOKEN]
    if lines is not None:
        adjusted = adjusted_blocks(
            arm_cells(spec, E2E_PER_TOKEN, first),
            arm_cells(base, E2E_PER_TOKEN, first),
            *lines,
            min_requests=1,
            target_load=None,
        )
        cs = confidence_sequence(adjusted.blocks, alpha=0.5, mixture_scale=MIXTURE_SCALE)
        if cs is not None:
            log_diff, log_se = cs.estimate, math.sqrt(1 / cs.information)
    ns, nb = int(spec.requests[first:].sum()), int(base.requests[first:].sum())
    rs = float(spec.errors[first:].sum() + 1) / (ns + 2)
    rb = float(base.errors[first:].sum() + 1) / (nb + 2)
    return Recent(
        slots=len(arms.starts) - first,
        log_difference=log_diff,
        log_difference_se=log_se,
        error_difference=int(spec.errors[first:].sum()) / ns - int(base.errors[first:].sum()) / nb,
        error_difference_se=math.sqrt(rs * (1 - rs) / ns + rb * (1 - rb) / nb),
    )


def next_stage_evidence(arms: Arms) -> tuple[NextStage | None, Missing]:
    """The load promotion would put on the spec pool, and the speedup read at it."""
    r = arms.rollout
    if r.state == RolloutState.FULL.value:
        return None, []
    first = arms.stage_first
    if first >= len(arms.starts):
        return None, ["no windows since the stage began"]
    span = arms.starts[first:]
    seconds = (span[-1] - span[0]).total_seconds() + arms.window_seconds
    plan = load_plan(
        r,
        arms.t,
        spec_requests=int(arms.spec.requests[first:].sum()),
        baseline_requests=int(arms.base.requests[first:].sum()),
        seconds=seconds,
    )
    e2e = arms.spec.e2e_ms[first:].sum(axis=0)  # [samples, sum ms]
    load_now = arms.spec.mean_load(first)
    if load_now is None or e2e[0] == 0:
        return None, [f"{plan.target}: no dispatched spec requests in this stage"]
    spec_latency_s = float(e2e[1] / e2e[0]) / 1000.0
    lines = arms.lines[E2E_PER_TOKEN]
    # The spec arm's own line says how its latency grows with the load it will carry.
    flow = SpecFlow(
        load_now=load_now,
        share_now=plan.share_now,
        segment_rate_per_s=plan.segment_rate_per_s,
        spec_latency_s=spec_latency_s,
        spec_workers=arms.spec_workers,
        log_slope=lines[0].slope if lines is not None else 0.0,
    )
    load_next = flow.load_at(plan.share_next)
    readable = readable_loads(lines) if lines is not None else None
    missing: Missing = []
    speedup = None
    if within(readable, load_next):
        speedup, missing = stage_comparison(arms, E2E_PER_TOKEN, load_next)
    reachable_share = None
    if readable is not None and load_next > readable[1]:
        reachable_share = flow.share_for(readable[1])
    advice = next_stage_advice(
        plan,
        load_next,
        speedup,
        readable,
        reachable_share,
        min_samples=arms.t.min_samples,
        min_block_requests=arms.t.min_block_requests,
    )
    next_stage = NextStage(
        target=plan.target,
        share_now=plan.share_now,
        share_next=plan.share_next,
        segment_rate_per_s=plan.segment_rate_per_s,
        spec_workers=arms.spec_workers,
        spec_load_now=load_now,
        spec_load_next=load_next,
        load_bucket=load_bucket(int(load_next)),
        load_floor=LOAD_BUCKET_EDGES[load_bucket(int(load_next))],
        speedup=speedup,
        advice=advice,
        readable_loads=readable,
        reachable_share=reachable_share,
    )
    return next_stage, missing


def next_stage_advice(
    plan: LoadPlan,
    load_next: float,
    speedup: StageComparison | None,
    readable: tuple[float, float] | None,
    reachable_share: float | None,
    *,
    min_samples: int,
    min_block_requests: int,
) -> str | None:
    """Why the next stage cannot be judged yet, and what would make it judgeable."""
    where = (
        f"the spec pool would carry {load_next:.1f} requests per worker at {plan.share_next:g} %"
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
    if speedup is None:
        # NOTE: the stage's requests count only once they fill a block (min_block_requests
        # on each arm): "0 spec requests" read as no traffic at all.
        return (
            f"not enough evidence at the {plan.target}'s load yet: {where}; no block of "
            f"this stage has {min_block_requests} requests on each arm yet"
        )
    have = speedup.spec_requests
    if have < min_samples:
        return (
            f"not enough evidence at the {plan.target}'s load yet: {where}; this stage "
            f"has {have} spec requests (needs {min_samples})"
        )
    return None


def _arm_summary(panel: ArmPanel, window_ids: list[int]) -> ArmSummary:
    return ArmSummary(
        window_ids=window_ids,
        requests=int(panel.requests.sum()),
        errors=int(panel.errors.sum()),
        mean_load=panel.mean_load(),
    )


def _block_tuple(block: BlockEstimate) -> BlockTuple:
    return (block.estimate, block.variance, block.first_slot, block.last_slot)
