"""Each arm's latency as a line over load, so two arms are compared at a load one may not carry.

Why not matched buckets alone: in a fleet the gateway's least-outstanding
balancer keeps every worker of a pool at almost the same load, so the arms'
loads at dispatch sit far apart at most stages (a 1 % canary's spec workers
at load 0 while baseline workers carry ~5; at `full` the reverse) and a
bucket-by-bucket comparison finds no bucket both arms populate.

So each arm gets a line, fitted on its own telemetry cells (time slot x load
stratum; a cell holds n requests, the sum and the sum of squares of their log
latency, and their mean load at dispatch x):

    log latency = level + slope * (x - center)

by weighted least squares (weights n). Its uncertainty is honest in two ways:

- the per-request residual variance is the pooled within-cell variance,
  multiplied by the lack-of-fit ratio phi = (between-cell residual mean square)
  / (within-cell variance) when that exceeds 1: cells that stray from the line
  more than their own noise allows (curvature, drift) widen every interval;
- an arm whose loads barely vary (least-outstanding at low load keeps every
  request at 0) cannot pin its own slope: its slope is shrunk towards the other
  arm's with a prior spread of SLOPE_PRIOR_SD per request, so the interval
  grows with the distance it extrapolates, and an arm never extrapolates
  farther than `reach` beyond the loads it was seen at.

Blocks (for the sequential monitors and the promotion interval): consecutive
slots are gathered until each arm holds `min_requests` requests; within a block
each arm's mean log latency is moved along its line to the target load and the
two are differenced:

    d_b = [ybar_s + slope_s (L - xbar_s)] - [ybar_b + slope_b (L - xbar_b)]     # per block

with the block's sampling variance. The slopes' own error is common to every
block, so it is not folded into the blocks (they would no longer be
independent): `slope_bias` bounds it separately, from each slope's
error times the distance it is applied over, plus the line's own form
(`curvature_bias`: latency, not its log, is what grows about linearly with an
engine's batch), and the callers add that bound to their margins or intervals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

from control.stats.panel import BUCKET_MIDPOINTS, N_LOAD, UNKNOWN_LOAD, ArmPanel
from control.stats.sequential import BlockEstimate

# Prior spread of the difference between the two arms' slopes, in log latency per
# request of load (5 % per request): what an arm's slope may be when its own data
# cannot say; and a weak prior on each slope (50 % per request), so that two arms with
# no load spread at all still have a finite (wide) slope.
SLOPE_PRIOR_SD = 0.05
SLOPE_ABSOLUTE_SD = 0.5
# An arm extrapolates at most REACH_SPANS widths of its observed range beyond the loads
# it was seen at, and never less than MIN_REACH requests per worker. NOTE: 1.5, not 1:
# one worker per pool at 200 requests/s puts a 1 % canary's spec arm at loads 0-1 and
# the baseline at 24-44, and the canary's next stage (load ~1) lies 23 below the
# baseline's data; within its range the line's straightness is checked (lack of fit).
REACH_SPANS = 1.5
MIN_REACH = 2.0
# The observed range: the loads between these request-weighted quantiles.
RANGE_QUANTILES = (0.025, 0.975)
_BLOCK_MIN_DOF = 5
# NOTE: a floor on per-request log-latency variance: no two real requests take
# exactly the same time, and a zero would make a block's variance zero.
MIN_LOG_VARIANCE = 1e-4
_MID = np.asarray(BUCKET_MIDPOINTS, dtype=np.float64)  # [N_LOAD]


@dataclass(frozen=True, slots=True)
class ArmCells:
    """One arm's cells for one metric over slots [first, T): requests, log moments, load."""

    n: NDArray[np.float64]  # [T', N_STRATA]
    sum_log: NDArray[np.float64]  # [T', N_STRATA]
    sum_sq: NDArray[np.float64]  # [T', N_STRATA]
    load: NDArray[np.float64]  # [T', N_STRATA] mean load at dispatch of each cell

    @property
    def requests(self) -> int:
        return int(self.n.sum())


def arm_cells(panel: ArmPanel, metric: int, first: int = 0, last: int | None = None) -> ArmCells:
    """The cells of `panel` for `metric` over slots [first, last).

    A cell's load is its slice's recorded mean load; the bucket's midpoint where the
    gateway sent none; for the stratum of unknown load (a gateway that did not split
    by load) the slot's mean load at dispatch.
    """
    moments = panel.moments[first:last, :, metric]  # [T', N_STRATA, 3]
    strata = panel.strata_load[first:last]  # [T', N_STRATA, 2]
    assert moments.shape[:2] == strata.shape[:2], (moments.shape, strata.shape)
    dispatched = np.maximum(strata[:, :, 0], 1e-12)
    load = np.where(strata[:, :, 0] > 0, strata[:, :, 1] / dispatched, 0.0)  # [T', N_STRATA]
    load[:, :N_LOAD] = np.where(strata[:, :N_LOAD, 0] > 0, load[:, :N_LOAD], _MID[None, :])
    totals = panel.load[first:last]  # [T', LOAD_FIELDS]
    slot_mean = np.where(totals[:, 0] > 0, totals[:, 1] / np.maximum(totals[:, 0], 1), 0.0)
    load[:, UNKNOWN_LOAD] = slot_mean
    return ArmCells(moments[:, :, 0], moments[:, :, 1], moments[:, :, 2], load)


@dataclass(frozen=True, slots=True)
class LoadLine:
    """log latency = level + slope (load - center) for one arm, with its uncertainty."""

    level: float
    center: float
    slope: float
    own_slope_information: float  # sum n (x - center)^2 / variance: what the arm's data says
    residual_variance: float  # per request, inflated by the lack-of-fit ratio
    lack_of_fit: float  # phi >= 1
    requests: int
    load_low: float
    load_high: float

    @property
    def reach(self) -> float:
        return max(MIN_REACH, REACH_SPANS * (self.load_high - self.load_low))

    @property
    def readable(self) -> tuple[float, float]:
        """The loads this line may be read at: its observed range widened by `reach`."""
        return self.load_low - self.reach, self.load_high + self.reach

    def covers(self, load: float) -> bool:
        low, high = self.readable
        return low <= load <= high


def fit_line(cells: ArmCells) -> LoadLine | None:
    """Weighted least squares over the cells; None with fewer than 3 requests."""
    n = cells.n.ravel()
    filled = n > 0
    n = n[filled]
    total = float(n.sum())
    if total < 3:
        return None
    s1 = cells.sum_log.ravel()[filled]
    s2 = cells.sum_sq.ravel()[filled]
    x = cells.load.ravel()[filled]
    means = s1 / n  # [cells]
    center = float(np.sum(n * x) / total)
    level = float(s1.sum() / total)
    dx = x - center
    sxx = float(np.sum(n * dx * dx))
    slope = float(np.sum(n * dx * (means - level)) / sxx) if sxx > 1e-9 else 0.0
    dof_within = total - len(n)
    within = float(np.sum(s2 - s1 * s1 / n))
    variance = max(within / dof_within, MIN_LOG_VARIANCE) if dof_within >= 2 else 1.0
    residual = means - level - slope * dx
    dof_between = len(n) - (2 if sxx > 1e-9 else 1)
    phi = 1.0
    if dof_between > 0:
        phi = max(1.0, float(np.sum(n * residual * residual)) / dof_between / variance)
    variance *= phi
    low, high = _weighted_quantiles(x, n, RANGE_QUANTILES)
    information = sxx / variance
    return LoadLine(
        level=level,
        center=center,
        slope=slope,
        own_slope_information=information,
        residual_variance=variance,
        lack_of_fit=phi,
        requests=int(total),
        load_low=low,
        load_high=high,
    )


def _weighted_quantiles(
    x: NDArray[np.float64], weights: NDArray[np.float64], qs: tuple[float, float]
) -> tuple[float, float]:
    order = np.argsort(x)
    cumulative = np.cumsum(weights[order]) / weights.sum()
    ordered = x[order]
    picks = [float(ordered[min(int(np.searchsorted(cumulative, q)), len(x) - 1)]) for q in qs]
    return picks[0], picks[1]


@dataclass(frozen=True, slots=True)
class SlopePair:
    """Both arms' slopes, estimated together: each arm's own estimate, a prior that the two
    differ by N(0, SLOPE_PRIOR_SD^2), and a weak N(0, SLOPE_ABSOLUTE_SD^2) prior on each.
    An arm whose loads pin its slope keeps it; one whose loads do not borrows the other's,
    and the covariance says what either costs wherever the lines are read."""

    spec: float
    baseline: float
    covariance: tuple[tuple[float, float], tuple[float, float]]

    def error_variance(self, spec_distance: float, baseline_distance: float) -> float:
        """Var of slope_s * a - slope_b * b's error: what moving the spec arm `a` and the
        baseline `b` along their lines can add to a difference."""
        (css, csb), (_, cbb) = self.covariance
        a, b = spec_distance, baseline_distance
        return max(a * a * css + b * b * cbb - 2 * a * b * csb, 0.0)


def joint_slopes(spec: LoadLine, baseline: LoadLine) -> SlopePair:
    """Posterior mean and covariance of (slope_s, slope_b) under the priors above (2 x 2)."""
    ps, pb = spec.own_slope_information, baseline.own_slope_information
    tie = 1.0 / SLOPE_PRIOR_SD**2
    weak = 1.0 / SLOPE_ABSOLUTE_SD**2
    # Precision matrix [[ps + tie + weak, -tie], [-tie, pb + tie + weak]].
    a, d, off = ps + tie + weak, pb + tie + weak, -tie
    det = a * d - off * off
    css, cbb, csb = d / det, a / det, -off / det
    rhs_s, rhs_b = ps * spec.slope, pb * baseline.slope
    return SlopePair(
        spec=css * rhs_s + csb * rhs_b,
        baseline=csb * rhs_s + cbb * rhs_b,
        covariance=((css, csb), (csb, cbb)),
    )


@dataclass(frozen=True, slots=True)
class AdjustedBlocks:
    """Block differences moved to a target load, and where each arm's blocks sat."""

    blocks: list[BlockEstimate]
    spec_load: float  # information-weighted mean of the spec arm's block loads
    baseline_load: float
    target_load: float | None  # None: each block at the spec arm's own load


def adjusted_blocks(
    spec: ArmCells,
    baseline: ArmCells,
    spec_line: LoadLine,
    baseline_line: LoadLine,
    slopes: SlopePair,
    *,
    min_requests: int,
    target_load: float | None,
    first_slot: int = 0,
) -> AdjustedBlocks:
    """log(spec) - log(baseline) per block of >= min_requests requests per arm, both moved
    along their lines to `target_load` (None: to the spec arm's own mean load in the
    block, which then needs no slope of its own)."""
    assert spec.n.shape == baseline.n.shape, (spec.n.shape, baseline.n.shape)
    ns_t, nb_t = spec.n.sum(axis=1), baseline.n.sum(axis=1)  # [T']
    bounds: list[tuple[int, int]] = []
    acc_s = acc_b = 0.0
    start = 0
    for t in range(ns_t.shape[0]):
        acc_s += float(ns_t[t])
        acc_b += float(nb_t[t])
        if acc_s >= min_requests and acc_b >= min_requests:
            bounds.append((start, t))
            acc_s = acc_b = 0.0
            start = t + 1
    blocks: list[BlockEstimate] = []
    loads_s: list[tuple[float, float]] = []
    loads_b: list[tuple[float, float]] = []
    starts = [a for a, _ in bounds]
    end = bounds[-1][1] + 1 if bounds else 0
    spec_moments = _block_moments(spec, starts, end, slopes.spec, spec_line.residual_variance)
    base_moments = _block_moments(
        baseline, starts, end, slopes.baseline, baseline_line.residual_variance
    )
    for (a, b), (ms, vs, xs), (mb, vb, xb) in zip(bounds, spec_moments, base_moments, strict=True):
        target = xs if target_load is None else target_load
        # NOTE: the joint slopes, not each line's own: an arm whose loads never vary has
        # no slope of its own, and `slope_bias` bounds the joint slopes' error.
        moved_spec = ms + slopes.spec * (target - xs)
        moved_base = mb + slopes.baseline * (target - xb)
        estimate = moved_spec - moved_base
        variance = vs + vb
        blocks.append(BlockEstimate(estimate, variance, first_slot + a, first_slot + b))
        loads_s.append((xs, 1.0 / variance))
        loads_b.append((xb, 1.0 / variance))
    return AdjustedBlocks(
        blocks=blocks,
        spec_load=_weighted_mean(loads_s, spec_line.center),
        baseline_load=_weighted_mean(loads_b, baseline_line.center),
        target_load=target_load,
    )


def _block_moments(
    cells: ArmCells, starts: list[int], end: int, slope: float, fallback: float
) -> list[tuple[float, float, float]]:
    """(mean log latency, its variance, mean load) of each block of one arm: block i holds
    the slots from starts[i] up to the next start (the last one up to `end`).

    The per-request variance is the spread of the block's requests about the arm's line
    through the block mean (slope `slope`): within each cell plus each cell's distance
    from that line. NOTE: within cells alone missed a cell of one request: a stall alone
    in its load stratum moved the block's mean and added nothing to its variance (a
    heavy-tailed null read as +36 % at z = 13 at one worker per pool). With the block's
    sums N, S1 = sum y, S2 = sum y^2, X = sum x, XS = sum x y, XX = sum x^2 over its
    requests (x a cell's load), the sum of squares about that line is

        S2 - S1^2 / N - 2 slope (XS - X S1 / N) + slope^2 (XX - X^2 / N)."""
    if not starts:
        return []
    n, s1, x = cells.n[:end], cells.sum_log[:end], cells.load[:end]
    sums = np.stack(  # [6, slots]: each slot's sums over its strata
        [n, s1, cells.sum_sq[:end], n * x, x * s1, n * x * x], axis=0
    ).sum(axis=2)
    total, s1_b, s2_b, x_b, xs_b, xx_b = np.add.reduceat(sums, starts, axis=1)  # [blocks]
    mean = s1_b / total
    mean_load = x_b / total
    squares = (
        s2_b
        - s1_b * mean
        - 2 * slope * (xs_b - x_b * mean)
        + slope * slope * (xx_b - x_b * mean_load)
    )
    dof = total - 1
    per_request = np.where(
        dof >= _BLOCK_MIN_DOF,
        np.maximum(squares / np.maximum(dof, 1.0), MIN_LOG_VARIANCE),
        fallback,
    )
    return list(zip(mean.tolist(), (per_request / total).tolist(), mean_load.tolist(), strict=True))


def _weighted_mean(pairs: list[tuple[float, float]], default: float) -> float:
    weight = sum(w for _, w in pairs)
    return sum(x * w for x, w in pairs) / weight if weight > 0 else default


def slope_bias(
    slopes: SlopePair, adjusted: AdjustedBlocks, alpha: float, *, curvature: bool = True
) -> float:
    """Bound (log units) on what moving the arms along their lines can add to the blocks'
    mean difference: the slopes' errors over the distances they were applied (two-sided
    Gaussian at level alpha) plus, with `curvature`, each arm's `curvature_bias` over its
    distance.

    NOTE: not an always-valid radius: the slopes are nuisances whose error is mostly the
    prior's spread where an arm's own loads do not vary, and a normal-mixture radius
    over so little information would be many times wider than the prior itself."""
    target = adjusted.spec_load if adjusted.target_load is None else adjusted.target_load
    spec_distance = target - adjusted.spec_load
    baseline_distance = target - adjusted.baseline_load
    variance = slopes.error_variance(spec_distance, baseline_distance)
    bias = NormalDist().inv_cdf(1 - alpha / 2) * math.sqrt(variance)
    if curvature:
        bias += curvature_bias(slopes.spec, spec_distance)
        bias += curvature_bias(slopes.baseline, baseline_distance)
    return bias


def curvature_bias(slope: float, distance: float) -> float:
    """How far a line in log latency, moved `distance` along `slope`, can sit from an arm
    whose latency itself (not its log) grows linearly with load at the same slope where
    it was seen: |s D - ln(1 + s D)|.

    Why: an engine's step time grows about linearly with its batch, so ln latency bends
    (concave) and a straight line read far from an arm's loads overstates a busy arm's
    latency at a light load, by ~5 % from 35 requests down to 0 at 0.8 % per request:
    identical arms at one worker per pool (a 1 % canary's spec worker at ~0.3, the
    baseline's at ~35) read as a 1.04-1.11x speedup without it. Nothing within an
    arm's own loads; NOTE: s D is kept above -0.99 (the straight line would reach zero
    latency), which bounds the allowance at ~3.6 (not readable in practice)."""
    x = max(slope * distance, -0.99)
    return abs(x - math.log1p(x))


def adjusted_quantile(
    counts: NDArray[np.int32],
    load: NDArray[np.float64],
    log_midpoints: NDArray[np.float64],
    slope: float,
    target_load: float,
    q: float,
) -> float | None:
    """Quantile q (in log ms) of one arm's latencies moved along its line to `target_load`:
    each cell's histogram shifted by slope (target - cell load). counts: [T', S, buckets],
    load: [T', S], log_midpoints: [buckets]."""
    assert counts.shape[:2] == load.shape and counts.shape[2] == log_midpoints.shape[0]
    weights = counts.reshape(-1, counts.shape[2]).astype(np.float64)  # [cells, buckets]
    shift = slope * (target_load - load.reshape(-1))  # [cells]
    values = log_midpoints[None, :] + shift[:, None]  # [cells, buckets]
    w = weights.ravel()
    if w.sum() <= 0:
        return None
    v = values.ravel()[w > 0]
    w = w[w > 0]
    order = np.argsort(v)
    cumulative = np.cumsum(w[order]) / w.sum()
    ordered = v[order]
    return float(ordered[min(int(np.searchsorted(cumulative, q)), len(v) - 1)])
