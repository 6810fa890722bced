"""CUSUM and confidence sequences: against plain references and by simulation."""

import math

import numpy as np
import pytest

from control.stats import (
    BlockEstimate,
    StatsError,
    confidence_sequence,
    cusum_threshold,
    gaussian_cusum,
    mixture_radius,
)
from control.stats.sequential import (
    llr_cusum,
    one_sided_mixture_radius,
    rate_alternatives,
    rate_exceedance,
    rate_log_evidence,
)


def _blocks(estimates: np.ndarray, variance: float) -> list[BlockEstimate]:
    return [BlockEstimate(float(x), variance, i, i) for i, x in enumerate(estimates)]


def _reference_peak(estimates: np.ndarray, variance: float, null: float, shift: float) -> float:
    """max over start s <= t of sum_{s..t} l_b: what Page's recursion computes."""
    llr = shift / variance * (estimates - null - shift / 2)
    peak = 0.0
    for start in range(len(llr)):
        peak = max(peak, float(np.max(np.cumsum(llr[start:]))))
    return peak


def test_threshold_spends_the_budget_over_horizon_and_shifts() -> None:
    assert cusum_threshold(0.01, 100, 4) == pytest.approx(math.log(100 * 4 / 0.01))
    with pytest.raises(StatsError):
        cusum_threshold(0.0, 100, 1)
    with pytest.raises(StatsError):
        cusum_threshold(0.01, 0, 1)


def test_cusum_recursion_equals_the_maximum_over_start_times() -> None:
    rng = np.random.default_rng(1)
    estimates = rng.normal(0.05, 0.1, 60)
    result = gaussian_cusum(
        _blocks(estimates, 0.01), null_value=0.0, shifts=[0.05], alpha=0.01, horizon_blocks=100
    )
    assert result.peak == pytest.approx(_reference_peak(estimates, 0.01, 0.0, 0.05))
    assert result.blocks == 60 and result.last_estimate == pytest.approx(estimates[-1])
    assert result.budget_spent == pytest.approx(0.6 * 0.01)


def test_cusum_false_alarms_stay_under_alpha_even_at_the_null_boundary() -> None:
    rng = np.random.default_rng(2)
    alpha, horizon, runs = 0.05, 200, 2000
    variance = 0.004
    alarms = 0
    for _ in range(runs):
        # The worst case of H0: the effect exactly at the margin.
        estimates = rng.normal(0.1, math.sqrt(variance), horizon)
        result = gaussian_cusum(
            _blocks(estimates, variance),
            null_value=0.1,
            shifts=[0.025, 0.05, 0.1, 0.2],
            alpha=alpha,
            horizon_blocks=horizon,
        )
        alarms += result.alarm
    # Ville + the union bound make alpha an upper bound; it is far from tight.
    assert alarms / runs <= alpha


def test_cusum_catches_a_change_that_starts_late() -> None:
    rng = np.random.default_rng(3)
    variance = 0.0025
    quiet = rng.normal(0.0, math.sqrt(variance), 300)
    changed = rng.normal(0.3, math.sqrt(variance), 10)  # 0.2 beyond a margin of 0.1
    result = gaussian_cusum(
        _blocks(np.concatenate([quiet, changed]), variance),
        null_value=0.1,
        shifts=[0.05, 0.1, 0.2, 0.4],
        alpha=0.0025,
        horizon_blocks=1000,
    )
    assert result.alarm and result.alarm_block is not None
    # Each block adds ~ 0.2^2 / (2 v) = 8 to the statistic; threshold ln(4000/0.0025) = 14.3.
    assert 300 <= result.alarm_block <= 302


def test_llr_cusum_matches_the_gaussian_one_on_the_same_increments() -> None:
    rng = np.random.default_rng(4)
    estimates = rng.normal(0.2, 0.05, 30)
    shift, null, variance = 0.1, 0.05, 0.0025
    llr = shift / variance * (estimates - null - shift / 2)
    last, peak, first = llr_cusum(list(llr), threshold=20.0)
    gaussian = gaussian_cusum(
        _blocks(estimates, variance),
        null_value=null,
        shifts=[shift],
        alpha=math.exp(-20.0),
        horizon_blocks=1,
    )
    assert peak == pytest.approx(gaussian.peak) and last == pytest.approx(gaussian.statistic)
    assert first == gaussian.alarm_block


def test_mixture_radius_closed_form_and_limits() -> None:
    info, alpha, rho = 400.0, 0.05, 0.1
    ir2 = info * rho**2
    expected = math.sqrt(2 * (1 + ir2) / (info**2 * rho**2) * (math.log(20) + math.log1p(ir2) / 2))
    assert mixture_radius(info, alpha, rho) == pytest.approx(expected)
    assert mixture_radius(0.0, alpha, rho) == math.inf
    # Wider than the fixed-sample interval at the same level: the price of looking often.
    assert mixture_radius(info, alpha, rho) > 1.96 / math.sqrt(info)


def test_confidence_sequence_is_inverse_variance_weighted_and_covers_always() -> None:
    blocks = [BlockEstimate(1.0, 1.0, 0, 0), BlockEstimate(2.0, 0.5, 1, 1)]
    cs = confidence_sequence(blocks, alpha=0.05, mixture_scale=0.5)
    assert cs is not None
    assert cs.estimate == pytest.approx((1.0 / 1.0 + 2.0 / 0.5) / (1 / 1.0 + 1 / 0.5))
    assert cs.information == pytest.approx(3.0)
    assert confidence_sequence([], alpha=0.05, mixture_scale=0.1) is None

    rng = np.random.default_rng(5)
    alpha, runs, looks, truth = 0.05, 1000, 100, 0.2
    misses = 0
    for _ in range(runs):
        variances = rng.uniform(0.001, 0.01, looks)
        estimates = rng.normal(truth, np.sqrt(variances))
        info = np.cumsum(1 / variances)
        centre = np.cumsum(estimates / variances) / info
        radius = np.array([mixture_radius(float(i), alpha, 0.1) for i in info])
        # Looked at after every block: one miss anywhere counts.
        misses += bool(np.any(np.abs(centre - truth) > radius))
    assert misses / runs <= alpha


def test_one_sided_bound_holds_its_level_ever_and_is_narrower() -> None:
    alpha, rho = 0.05, 0.01
    for info in (1e3, 3e4, 3e5, 1e7):
        one, two = one_sided_mixture_radius(info, alpha, rho), mixture_radius(info, alpha, rho)
        # Between the two-sided radius at 2 alpha (about) and at alpha.
        assert mixture_radius(info, 2 * alpha, rho) * 0.99 <= one < two
    assert one_sided_mixture_radius(0.0, alpha, rho) == math.inf
    # The half-normal mixture at the radius equals 1 / alpha (the closed form).
    info = 3e5
    s = info * one_sided_mixture_radius(info, alpha, rho)
    r = rho**2 * info
    z = rho * s / math.sqrt(1 + r)
    value = 2 / math.sqrt(1 + r) * math.exp(z * z / 2) * 0.5 * math.erfc(-z / math.sqrt(2))
    assert value == pytest.approx(1 / alpha, rel=1e-6)

    # Looked at after every block, the upper end ever falls below the truth at most
    # alpha of the time (a non-inferiority pass of a pair exactly at the margin).
    rng = np.random.default_rng(11)
    runs, looks, truth, variance = 4000, 300, 0.01, 4e-4
    info_path = np.arange(1, looks + 1) / variance
    radius = np.array([one_sided_mixture_radius(float(i), alpha, rho) for i in info_path])
    estimates = rng.normal(truth, math.sqrt(variance), (runs, looks))
    centre = np.cumsum(estimates, axis=1) / np.arange(1, looks + 1)
    misses = float(np.mean(np.any(centre + radius < truth, axis=1)))
    assert 0.005 < misses <= alpha  # near its level, never above
    blocks = [BlockEstimate(0.004, 1e-5, 0, 0)]
    cs = confidence_sequence(blocks, alpha=alpha, mixture_scale=rho, one_sided=True)
    assert cs is not None and cs.one_sided
    assert cs.upper - cs.estimate == pytest.approx(one_sided_mixture_radius(1e5, alpha, rho))


def test_rate_exceedance_false_alarms_stay_under_alpha_at_the_allowed_rate() -> None:
    """Read after every window, the mixture test alarms on a rate at the allowed one in at
    most alpha of the runs (Ville), and the closer-to-alpha the longer it runs."""
    rng = np.random.default_rng(7)
    allowed, alpha, runs, windows, pairs = 0.01, 0.05, 2000, 200, 10
    failures = rng.binomial(pairs, allowed, size=(runs, windows)).cumsum(axis=1)
    trials = np.arange(1, windows + 1) * pairs
    evidence = rate_log_evidence(failures, np.broadcast_to(trials, failures.shape), allowed)
    ever = (evidence >= math.log(1 / alpha)).any(axis=1).mean()
    assert ever <= alpha, ever
    assert ever > 0.0  # the test is not vacuous: it does alarm sometimes, as Ville allows


def test_rate_exceedance_detects_a_broken_contract_in_a_few_pairs() -> None:
    ok = rate_exceedance(0, 500, allowed_rate=0.01, alpha=0.002)
    assert not ok.alarm and ok.log_evidence < 0 and ok.observed_rate == 0.0
    # Every pair differs: a handful of pairs is evidence enough.
    broken = [rate_exceedance(n, n, allowed_rate=0.01, alpha=0.002).alarm for n in range(1, 6)]
    assert broken.index(True) + 1 <= 3
    # 3 % against 1 % allowed takes longer but gets there.
    slow = rate_exceedance(30, 1000, allowed_rate=0.01, alpha=0.002)
    assert slow.alarm and slow.observed_rate == pytest.approx(0.03)
    # At the allowed rate, never.
    assert not rate_exceedance(10, 1000, allowed_rate=0.01, alpha=0.002).alarm
    with pytest.raises(StatsError):
        rate_exceedance(3, 2, allowed_rate=0.01, alpha=0.01)
    with pytest.raises(StatsError):
        rate_exceedance(0, 2, allowed_rate=0.0, alpha=0.01)


def test_rate_exceedance_at_high_allowed_rates_keeps_alpha_and_detects_a_skew() -> None:
    """From an allowed rate of 1/2 up (the sampled contract's 1/2 + margin) the
    alternatives lie between it and 1, so a rate just above it is detectable; at the
    allowed rate itself the test still alarms in at most alpha of the runs."""
    assert rate_alternatives(0.65) == pytest.approx(
        tuple(sorted(1 - 0.35 / m for m in (1.25, 1.6, 2.0, 3.0, 4.0, 8.0)))
    )
    assert all(0.01 < q < 1 for q in rate_alternatives(0.01))  # small rates unchanged
    assert rate_alternatives(0.01)[0] == pytest.approx(0.02)
    rng = np.random.default_rng(11)
    allowed, alpha, runs, windows, pairs = 0.65, 0.05, 2000, 200, 10
    hits = rng.binomial(pairs, allowed, size=(runs, windows)).cumsum(axis=1)
    trials = np.broadcast_to(np.arange(1, windows + 1) * pairs, hits.shape)
    ever = (rate_log_evidence(hits, trials, allowed) >= math.log(1 / alpha)).any(axis=1).mean()
    assert 0.0 < ever <= alpha, ever
    # 85 % against 65 % allowed: caught within a few hundred pairs.
    assert rate_exceedance(170, 200, allowed_rate=0.65, alpha=0.0005).alarm
    assert not rate_exceedance(100, 200, allowed_rate=0.65, alpha=0.0005).alarm
