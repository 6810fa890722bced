"""Wald SPRT on acceptance: closed forms, scipy likelihoods and simulated error rates."""

import math

import numpy as np
import pytest
from numpy.typing import NDArray
from pydantic import ValidationError
from scipy import stats

from control.stats import (
    AcceptanceCounts,
    InsufficientSamplesError,
    SprtConfig,
    SprtDecision,
    operating_characteristic,
    sprt_acceptance,
    sprt_test,
    wald_expected_trials,
)

CONFIG = SprtConfig(
    acceptable_rate=0.7, unacceptable_rate=0.6, alpha=0.05, beta=0.05, min_trials=200
)


def _first_decisions(
    config: SprtConfig, rate: float, paths: int, windows: int, trials_per_window: int, seed: int
) -> tuple[NDArray[np.int8], NDArray[np.int64]]:
    """Run the SPRT window by window on simulated Bernoulli trials.

    Returns the first non-continue decision code per path (0 if none) and the
    cumulative trials at that point.
    """
    rng = np.random.default_rng(seed)
    if trials_per_window == 1:
        successes = (rng.random((paths, windows)) < rate).astype(np.int64)  # [paths, windows]
    else:
        successes = rng.binomial(trials_per_window, rate, size=(paths, windows))
    cum_s = np.cumsum(successes, axis=1)  # [paths, windows]
    cum_t = np.broadcast_to(np.arange(1, windows + 1) * trials_per_window, cum_s.shape)
    codes = config.decide_many(cum_s, cum_t)  # [paths, windows]
    decided = codes != 0
    first = np.argmax(decided, axis=1)  # [paths]
    rows = np.arange(paths)
    final = np.where(decided.any(axis=1), codes[rows, first], 0).astype(np.int8)
    return final, cum_t[rows, first]


def test_llr_is_the_binomial_log_likelihood_ratio() -> None:
    result = sprt_test(130, 200, CONFIG)
    expected = stats.binom.logpmf(130, 200, 0.6) - stats.binom.logpmf(130, 200, 0.7)
    assert result.llr == pytest.approx(expected, rel=1e-10)
    assert result.llr == pytest.approx(130 * math.log(6 / 7) + 70 * math.log(4 / 3))
    assert result.upper_boundary == pytest.approx(math.log(19))
    assert result.lower_boundary == pytest.approx(-math.log(19))
    assert result.observed_rate == 0.65
    assert result.decision is SprtDecision.CONTINUE


def test_decisions_at_the_boundaries() -> None:
    # Each failure adds ln(4/3), each success ln(6/7); find counts either side.
    assert sprt_test(100, 200, CONFIG).decision is SprtDecision.REJECT
    assert sprt_test(160, 200, CONFIG).decision is SprtDecision.ACCEPT
    for s in range(0, 201):
        r = sprt_test(s, 200, CONFIG)
        if r.llr >= r.upper_boundary:
            assert r.decision is SprtDecision.REJECT
        elif r.llr <= r.lower_boundary:
            assert r.decision is SprtDecision.ACCEPT
        else:
            assert r.decision is SprtDecision.CONTINUE


def test_never_decides_below_the_minimum_trials() -> None:
    overwhelming = sprt_test(0, 199, CONFIG)
    assert overwhelming.llr > 10 * overwhelming.upper_boundary
    assert overwhelming.decision is SprtDecision.CONTINUE
    assert sprt_test(0, 200, CONFIG).decision is SprtDecision.REJECT
    assert sprt_test(199, 199, CONFIG).decision is SprtDecision.CONTINUE


@pytest.mark.parametrize(("rate", "wrong_code", "limit"), [(0.7, 1, 0.05), (0.6, -1, 0.05)])
def test_error_rates_at_the_boundary_rates_stay_within_the_configured_levels(
    rate: float, wrong_code: int, limit: float
) -> None:
    paths = 4000
    final, _ = _first_decisions(CONFIG, rate, paths, windows=200, trials_per_window=25, seed=17)
    assert np.mean(final == 0) < 0.005  # practically every path decides within 5,000 trials
    error_rate = np.mean(final == wrong_code)
    assert error_rate <= limit + 3 * math.sqrt(limit * (1 - limit) / paths)


def test_acceptance_well_below_threshold_is_caught_quickly() -> None:
    final, trials = _first_decisions(CONFIG, 0.5, 2000, windows=100, trials_per_window=25, seed=4)
    assert np.mean(final == 1) >= 0.999
    # min_trials binds: the SPRT decides at the first window allowed.
    assert np.median(trials) == 200
    final_good, _ = _first_decisions(CONFIG, 0.8, 2000, windows=100, trials_per_window=25, seed=5)
    assert np.mean(final_good == -1) >= 0.999


@pytest.mark.parametrize("rate", [0.6, 0.65, 0.7])
def test_expected_trials_match_wald_and_beat_a_fixed_sample(rate: float) -> None:
    config = CONFIG.model_copy(update={"min_trials": 1})
    _, trials = _first_decisions(config, rate, 2000, windows=1500, trials_per_window=1, seed=23)
    approx = wald_expected_trials(config, rate)
    # Wald's approximation ignores the overshoot, so the truth is a little above it.
    assert approx * 0.95 <= trials.mean() <= approx * 1.15
    z = stats.norm.ppf(0.95)
    fixed = ((z * math.sqrt(0.7 * 0.3) + z * math.sqrt(0.6 * 0.4)) / 0.1) ** 2
    if rate != 0.65:
        assert trials.mean() < 0.7 * fixed


def test_operating_characteristic_closed_forms() -> None:
    assert operating_characteristic(CONFIG, 0.7) == pytest.approx(0.95)
    assert operating_characteristic(CONFIG, 0.6) == pytest.approx(0.05)
    assert operating_characteristic(CONFIG, 0.8) > 0.99
    # At p0 the drift is -KL(p0 || p1); Wald's E[T] there in closed form:
    kl = 0.7 * math.log(0.7 / 0.6) + 0.3 * math.log(0.3 / 0.4)
    a = math.log(19)
    assert wald_expected_trials(CONFIG, 0.7) == pytest.approx((0.95 * a - 0.05 * a) / kl)


def test_sprt_on_acceptance_counters_uses_judged_positions() -> None:
    counts = AcceptanceCounts(
        drafts=100, drafted_tokens=400, accepted_tokens=150, accepted_per_position=(60, 45, 30, 15)
    )
    result = sprt_acceptance(counts, CONFIG)
    assert result.trials == 100 + 150 - 15
    assert result.successes == 150
    with pytest.raises(InsufficientSamplesError):
        sprt_acceptance(AcceptanceCounts(100, 400, 150), CONFIG)
    with pytest.raises(InsufficientSamplesError):
        sprt_test(5, 3, CONFIG)


def test_config_rejects_inverted_rates() -> None:
    with pytest.raises(ValidationError):
        SprtConfig(acceptable_rate=0.5, unacceptable_rate=0.6)
    assert SprtConfig(acceptable_rate=0.7, unacceptable_rate=0.6).model_dump()["min_trials"] == 200
