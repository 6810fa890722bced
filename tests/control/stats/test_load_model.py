"""Each arm's line over load: recovered slopes, honest extrapolation, and the comparison that
works where the arms' loads never overlap (the least-outstanding balancer's fleet)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from control.stats.load_model import (
    MIN_REACH,
    SLOPE_PRIOR_SD,
    ArmCells,
    adjusted_blocks,
    adjusted_quantile,
    curvature_bias,
    fit_line,
    joint_slopes,
    slope_bias,
)
from control.stats.panel import N_STRATA

SIGMA = 0.2  # per-request sd of log latency


def _cells(
    rng: np.random.Generator,
    loads: list[int],
    level: float,
    slope: float,
    slots: int = 20,
    per_slot: int = 200,
) -> ArmCells:
    """`per_slot` requests per slot at loads drawn from `loads`, log latency =
    level + slope * load + N(0, SIGMA^2); strata indexed by load (exact for loads < 4)."""
    n = np.zeros((slots, N_STRATA))
    s1 = np.zeros((slots, N_STRATA))
    s2 = np.zeros((slots, N_STRATA))
    load = np.zeros((slots, N_STRATA))
    for t in range(slots):
        x = rng.choice(loads, per_slot)
        y = level + slope * x + rng.normal(0.0, SIGMA, per_slot)
        for value in set(x.tolist()):
            inside = x == value
            stratum = min(int(value), N_STRATA - 2)
            n[t, stratum] += inside.sum()
            s1[t, stratum] += y[inside].sum()
            s2[t, stratum] += (y[inside] ** 2).sum()
            load[t, stratum] = value
    return ArmCells(n, s1, s2, load)


def test_the_line_recovers_level_and_slope_against_least_squares() -> None:
    rng = np.random.default_rng(1)
    cells = _cells(rng, [0, 1, 2, 3], level=2.0, slope=0.04)
    line = fit_line(cells)
    assert line is not None
    # Reference: ordinary least squares on the cell means, weighted by n.
    n, x = cells.n.ravel(), cells.load.ravel()
    keep = n > 0
    y = cells.sum_log.ravel()[keep] / n[keep]
    slope, intercept = np.polyfit(x[keep], y, 1, w=np.sqrt(n[keep]))
    assert line.slope == pytest.approx(slope, rel=1e-9)
    assert line.level - line.slope * line.center == pytest.approx(intercept, rel=1e-9)
    assert line.slope == pytest.approx(0.04, abs=0.005)
    assert line.residual_variance == pytest.approx(SIGMA**2, rel=0.1)
    assert (line.load_low, line.load_high) == (0.0, 3.0)
    assert line.covers(7.0) and not line.covers(3.0 + max(MIN_REACH, 1.5 * 3.0) + 0.1)


def test_curvature_the_line_cannot_follow_widens_its_variance() -> None:
    rng = np.random.default_rng(2)
    straight = fit_line(_cells(rng, [0, 1, 2, 3], level=2.0, slope=0.05))
    cells = _cells(rng, [0, 1, 2, 3], level=2.0, slope=0.0)
    bend = 0.08 * cells.load**2  # log latency + 0.08 x^2, the same in every request of a cell
    curved = fit_line(
        ArmCells(
            cells.n,
            cells.sum_log + cells.n * bend,
            cells.sum_sq + 2 * bend * cells.sum_log + cells.n * bend**2,
            cells.load,
        )
    )
    assert straight is not None and curved is not None
    assert straight.lack_of_fit < 2.0
    assert curved.lack_of_fit > 3.0
    assert curved.residual_variance > 3 * straight.residual_variance


def test_arms_that_never_share_a_load_are_compared_where_matched_buckets_find_nothing() -> None:
    """A 1 % canary behind least-outstanding: every spec request at load 0, every baseline
    request at 4-6. Both arms slow 4 % per request in flight; spec is 1.25x faster."""
    rng = np.random.default_rng(3)
    spec = _cells(rng, [0], level=math.log(8.0), slope=0.04, per_slot=20)
    base = _cells(rng, [4, 5, 6], level=math.log(10.0), slope=0.04)
    # No load stratum holds requests of both arms: nothing to match bucket by bucket.
    assert not np.any((spec.n.sum(0) > 0) & (base.n.sum(0) > 0))
    spec_line, base_line = fit_line(spec), fit_line(base)
    assert spec_line is not None and base_line is not None
    slopes = joint_slopes(spec_line, base_line)
    # The spec arm cannot pin its slope: it borrows the baseline's.
    assert spec_line.own_slope_information == 0.0
    assert slopes.spec == pytest.approx(slopes.baseline, abs=1e-3)
    assert slopes.baseline == pytest.approx(0.04, abs=0.01)
    for target in (0.25, 2.0):
        adjusted = adjusted_blocks(
            spec, base, spec_line, base_line, slopes, min_requests=50, target_load=target
        )
        assert len(adjusted.blocks) == 6  # 20 spec requests a slot: a block per 3 slots
        information = sum(1 / b.variance for b in adjusted.blocks)
        estimate = sum(b.estimate / b.variance for b in adjusted.blocks) / information
        bias = slope_bias(slopes, adjusted, alpha=0.01)
        radius = 3 / math.sqrt(information) + bias
        assert abs(estimate - math.log(0.8)) < radius
        assert bias > 0
        # The spec arm is moved along the borrowed slope: were it left flat, reading it at
        # load 2 would put it 2 x 0.04 = 0.08 too fast.
        assert estimate == pytest.approx(math.log(0.8), abs=0.03)
    # Farther from the spec arm's loads costs more: its slope is the prior's guess.
    near = adjusted_blocks(
        spec, base, spec_line, base_line, slopes, min_requests=50, target_load=0.25
    )
    far = adjusted_blocks(
        spec, base, spec_line, base_line, slopes, min_requests=50, target_load=2.0
    )
    assert slope_bias(slopes, far, 0.01) > 2 * slope_bias(slopes, near, 0.01)


def test_a_spec_arm_that_slows_faster_is_seen_losing_at_the_load_it_will_carry() -> None:
    """Wins at load 0-2 (its own data), loses beyond: the line read at 4 says so."""
    rng = np.random.default_rng(4)
    spec = _cells(rng, [0, 1, 2], level=math.log(7.0), slope=0.25)
    base = _cells(rng, [2, 3, 4, 5], level=math.log(10.0), slope=0.04)
    spec_line, base_line = fit_line(spec), fit_line(base)
    assert spec_line is not None and base_line is not None
    slopes = joint_slopes(spec_line, base_line)
    assert slopes.spec == pytest.approx(0.25, abs=0.02)  # its own loads pin it
    truth = {0.0: math.log(0.7), 4.0: math.log(0.7) + 4 * (0.25 - 0.04)}
    for target, expected in truth.items():
        adjusted = adjusted_blocks(
            spec, base, spec_line, base_line, slopes, min_requests=100, target_load=target
        )
        information = sum(1 / b.variance for b in adjusted.blocks)
        estimate = sum(b.estimate / b.variance for b in adjusted.blocks) / information
        assert estimate == pytest.approx(expected, abs=3 / math.sqrt(information) + 0.05)
    assert truth[4.0] > 0  # slower at 4 in flight


def test_the_prior_on_the_slopes_difference_sets_what_an_unpinned_slope_costs() -> None:
    rng = np.random.default_rng(5)
    flat = fit_line(_cells(rng, [0], level=2.0, slope=0.0))
    assert flat is not None
    slopes = joint_slopes(flat, flat)  # neither arm's loads vary
    # Both read at the same distance from the same load: only their difference matters.
    difference_sd = math.sqrt(slopes.error_variance(1.0, 1.0))
    assert difference_sd == pytest.approx(SLOPE_PRIOR_SD, rel=0.05)
    # One arm moved alone pays the weak absolute prior.
    assert math.sqrt(slopes.error_variance(1.0, 0.0)) > 5 * SLOPE_PRIOR_SD


def test_the_adjusted_quantile_shifts_each_cells_histogram_along_the_line() -> None:
    midpoints = np.log(np.asarray([1.0, 2.0, 4.0, 8.0]))
    counts = np.zeros((1, 2, 4), np.int32)
    counts[0, 0, 1] = 10  # 10 requests at 2 ms, load 0
    counts[0, 1, 2] = 10  # 10 requests at 4 ms, load 1
    load = np.asarray([[0.0, 1.0]])
    # A slope of ln 2 per request: both cells read at load 1 sit at 4 ms.
    q = adjusted_quantile(counts, load, midpoints, math.log(2.0), 1.0, 0.5)
    assert q == pytest.approx(math.log(4.0))
    assert adjusted_quantile(counts * 0, load, midpoints, 0.0, 1.0, 0.5) is None


def test_a_request_alone_in_its_cell_counts_in_its_blocks_variance() -> None:
    """A stall alone in its load stratum moves the block's mean: its variance must say so
    (within-cell spread alone read a heavy-tailed null as z = 13 at one worker)."""
    rng = np.random.default_rng(7)
    spec = _cells(rng, [1, 2], level=2.0, slope=0.0, slots=40, per_slot=13)
    base = _cells(rng, [4, 5, 6], level=2.0, slope=0.0, slots=40, per_slot=2000)
    # One more spec request in the last slot, at load 0 alone in its stratum, e^6 times
    # slower than the rest.
    spec.n[-1, 0], spec.sum_log[-1, 0], spec.sum_sq[-1, 0], spec.load[-1, 0] = 1, 8.0, 64.0, 0
    spec_line, base_line = fit_line(spec), fit_line(base)
    assert spec_line is not None and base_line is not None
    slopes = joint_slopes(spec_line, base_line)
    adjusted = adjusted_blocks(
        spec, base, spec_line, base_line, slopes, min_requests=10, target_load=None
    )
    assert len(adjusted.blocks) == 40
    block = adjusted.blocks[-1]
    assert block.estimate == pytest.approx(6 / 14, abs=0.1)
    # Its 14 requests spread by ~6 / sqrt(14) about their mean: the mean's variance is
    # ~(36 * 13 / 14) / 13 / 14, not SIGMA^2 / 13 from the spread inside the cells.
    assert block.variance == pytest.approx(36 / 14 / 14, rel=0.3)
    assert block.estimate / math.sqrt(block.variance) < 1.5
    # The other blocks keep the spread of their requests.
    typical = float(np.median([b.variance for b in adjusted.blocks[:-1]]))
    assert typical == pytest.approx(SIGMA**2 / 13, rel=0.3)


def test_identical_arms_far_apart_in_load_are_not_read_as_different() -> None:
    """Both arms' latency grows linearly with load (as an engine's step time does with its
    batch), so ln latency bends; the spec arm is seen at 0, the baseline at 30-40 (one
    worker per pool at a 1 % canary). The straight line read at 0 overstates the
    baseline; the curvature allowance keeps the interval around no difference."""
    rng = np.random.default_rng(11)
    a, b = 40.0, 0.6  # ms per token, + ms per request in flight: 1.5 % per request at 0

    def arm(loads: list[float], per_slot: int, slots: int = 20) -> ArmCells:
        """`per_slot` requests a slot, spread evenly over `loads` (one stratum each)."""
        shape = (slots, N_STRATA)
        n, s1, s2, load = (np.zeros(shape) for _ in range(4))
        for j, x in enumerate(loads):
            count = per_slot // len(loads)
            y = math.log(a + b * x) + rng.normal(0.0, SIGMA, (slots, count))
            n[:, j], s1[:, j], s2[:, j], load[:, j] = count, y.sum(1), (y * y).sum(1), x
        return ArmCells(n, s1, s2, load)

    spec, base = arm([0.0], per_slot=40), arm([30.0, 33.0, 36.0, 40.0], per_slot=2000)
    spec_line, base_line = fit_line(spec), fit_line(base)
    assert spec_line is not None and base_line is not None
    slopes = joint_slopes(spec_line, base_line)
    adjusted = adjusted_blocks(
        spec, base, spec_line, base_line, slopes, min_requests=40, target_load=None
    )
    information = sum(1 / blk.variance for blk in adjusted.blocks)
    estimate = sum(blk.estimate / blk.variance for blk in adjusted.blocks) / information
    sampling = 3 / math.sqrt(information)
    # The straight line puts the baseline ~6 % too slow at load 0: spec reads faster.
    assert estimate < -0.04
    assert abs(estimate) > sampling + slope_bias(slopes, adjusted, 0.01) - curvature_bias(
        slopes.baseline, -adjusted.baseline_load
    )
    # With the allowance the interval holds no difference.
    assert abs(estimate) < sampling + slope_bias(slopes, adjusted, 0.01)
    assert curvature_bias(slopes.baseline, 0.5) < 1e-4  # nothing within an arm's loads


def test_the_curvature_allowance_is_the_gap_to_a_linear_latency() -> None:
    # From 35 down to 0 at slope 0.0084 in ln units: ln(1 - 0.294) against -0.294.
    assert curvature_bias(0.0084, -35.0) == pytest.approx(-0.294 - math.log(1 - 0.294))
    assert curvature_bias(0.0, 50.0) == 0.0
    assert curvature_bias(0.01, -200.0) == pytest.approx(-0.99 - math.log(0.01))
