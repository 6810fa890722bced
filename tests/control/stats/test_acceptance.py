"""Acceptance estimates against closed forms and simulated drafts."""

from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from control.stats import (
    AcceptanceCounts,
    InconsistentCountersError,
    InsufficientSamplesError,
    StatsError,
    alpha_from_mean_accepted,
    estimate_acceptance,
    expected_speedup,
    expected_speedup_iid,
    expected_tokens_per_pass,
    expected_tokens_per_pass_iid,
    wilson_interval,
)
from specwire import Arm, SpecCounters, TelemetryWindow
from tests.control.stats.simulate import accepted_prefix, simulate_counts


def test_iid_expected_counters_give_alpha_exactly_and_raw_ratio_understates_it() -> None:
    # 10,000 drafts of 4 tokens with alpha = 0.8: n_i = D alpha^(i+1) exactly.
    counts = AcceptanceCounts(
        drafts=10_000,
        drafted_tokens=40_000,
        accepted_tokens=8000 + 6400 + 5120 + 4096,
        accepted_per_position=(8000, 6400, 5120, 4096),
    )
    est = estimate_acceptance(counts)
    assert est.conditional_rates == pytest.approx((0.8, 0.8, 0.8, 0.8))
    assert est.reach_rates == pytest.approx((0.8, 0.64, 0.512, 0.4096))
    assert est.position_trials == 10_000 + 23_616 - 4096
    assert est.alpha == pytest.approx(0.8, abs=1e-12)
    assert est.alpha_method == "per_position_mle"
    assert est.raw_acceptance_ratio == pytest.approx(0.5904)
    assert est.mean_acceptance_length == pytest.approx(expected_tokens_per_pass_iid(0.8, 4))
    assert est.alpha_lower is not None and est.alpha_upper is not None
    assert est.alpha_lower < 0.8 < est.alpha_upper


def test_conditional_rates_recover_simulated_position_rates() -> None:
    rng = np.random.default_rng(11)
    true_rates = [0.9, 0.7, 0.5, 0.3]
    est = estimate_acceptance(simulate_counts(rng, true_rates, 200_000))
    # Drafts that reached position i: all drafts, then n_{i-1} = D * reach_{i-1}.
    reached = [200_000.0, *[200_000 * (r or 0.0) for r in est.reach_rates[:-1]]]
    for i, rate in enumerate(est.conditional_rates):
        assert rate is not None
        se = np.sqrt(true_rates[i] * (1 - true_rates[i]) / reached[i])
        assert abs(rate - true_rates[i]) < 5 * se


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_expected_tokens_per_pass_matches_simulated_truncated_drafts(k: int) -> None:
    rng = np.random.default_rng(5 + k)
    true_rates = np.array([0.85, 0.7, 0.6, 0.4, 0.2])
    est = estimate_acceptance(simulate_counts(rng, true_rates, 100_000))
    # Independent simulation of drafting only k tokens: 1 + leading accepted tokens.
    tokens = 1 + accepted_prefix(rng, true_rates[:k], 100_000).sum(axis=1)  # [drafts]
    predicted = expected_tokens_per_pass(est.conditional_rates, k)
    assert predicted == pytest.approx(tokens.mean(), abs=5 * tokens.std() / np.sqrt(100_000) + 0.01)
    assert predicted == pytest.approx(expected_tokens_per_pass(list(true_rates), k), abs=0.02)


def test_pooled_alpha_is_the_mle_and_wilson_interval_covers() -> None:
    rng = np.random.default_rng(3)
    alpha, replicates = 0.65, 400
    covered = 0
    estimates = []
    for _ in range(replicates):
        est = estimate_acceptance(simulate_counts(rng, [alpha] * 5, 150))
        assert est.alpha is not None and est.alpha_lower is not None
        assert est.alpha_upper is not None
        estimates.append(est.alpha)
        covered += est.alpha_lower <= alpha <= est.alpha_upper
    assert np.mean(estimates) == pytest.approx(alpha, abs=0.01)
    # 95 % interval: coverage of 400 replicates within 3 binomial standard errors.
    assert covered / replicates >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / replicates)


def test_wilson_bounds_solve_the_score_equation() -> None:
    successes, trials = 37, 120
    z = stats.norm.ppf(0.975)
    for bound in wilson_interval(successes, trials, 0.95):
        score = (successes / trials - bound) / np.sqrt(bound * (1 - bound) / trials)
        assert score**2 == pytest.approx(z**2, rel=1e-9)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_moment_estimate_without_per_position_counters() -> None:
    # Mean accepted per draft for iid 0.7 and k = 3: 0.7 + 0.49 + 0.343.
    mean_accepted = 0.7 + 0.49 + 0.343
    assert alpha_from_mean_accepted(mean_accepted, 3) == pytest.approx(0.7, abs=1e-10)
    est = estimate_acceptance(
        AcceptanceCounts(drafts=1000, drafted_tokens=3000, accepted_tokens=1533)
    )
    assert est.alpha_method == "moments"
    assert est.alpha == pytest.approx(0.7, abs=1e-10)
    assert est.position_trials is None and est.conditional_rates == ()
    assert alpha_from_mean_accepted(0.0, 3) == 0.0
    assert alpha_from_mean_accepted(3.0, 3) == 1.0


def test_zero_drafts_gives_no_evidence_instead_of_dividing_by_zero() -> None:
    est = estimate_acceptance(AcceptanceCounts(0, 0, 0, (0, 0, 0)))
    assert est.alpha is None and est.mean_acceptance_length is None
    assert est.raw_acceptance_ratio is None
    assert est.conditional_rates == (None, None, None)
    assert estimate_acceptance(AcceptanceCounts(0, 0, 0)).num_positions == 0


def test_all_rejected_and_all_accepted_edges() -> None:
    rejected = estimate_acceptance(AcceptanceCounts(50, 150, 0, (0, 0, 0)))
    assert rejected.conditional_rates == (0.0, None, None)
    assert rejected.alpha == 0.0
    assert expected_tokens_per_pass(rejected.conditional_rates, 3) == 1.0

    accepted = estimate_acceptance(AcceptanceCounts(50, 150, 150, (50, 50, 50)))
    assert accepted.alpha == 1.0
    assert expected_tokens_per_pass(accepted.conditional_rates, 3) == 4.0
    assert expected_tokens_per_pass_iid(1.0, 3) == 4.0
    assert expected_speedup_iid(1.0, 3, 0.1) == pytest.approx(4 / 1.3)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.8, 0.999999, 1.0])
@pytest.mark.parametrize("k", [1, 2, 5, 8])
@pytest.mark.parametrize("cost", [0.0, 0.05, 0.4])
def test_general_speedup_equals_iid_closed_form_for_constant_rates(
    alpha: float, k: int, cost: float
) -> None:
    closed = (
        (k + 1) / (1 + k * cost)
        if alpha == 1
        else (1 - alpha ** (k + 1)) / ((1 - alpha) * (1 + k * cost))
    )
    assert expected_speedup_iid(alpha, k, cost) == pytest.approx(closed, rel=1e-9)
    assert expected_speedup([alpha] * k, k, cost) == pytest.approx(closed, rel=1e-9)
    # Extrapolating every position with the fill rate is the same thing.
    assert expected_speedup([], k, cost, fill_rate=alpha) == pytest.approx(closed, rel=1e-9)


def test_more_positions_than_measured_needs_a_fill_rate() -> None:
    with pytest.raises(InsufficientSamplesError):
        expected_tokens_per_pass([0.8, 0.7], 3)
    assert expected_tokens_per_pass([0.8, 0.7], 3, fill_rate=0.5) == pytest.approx(
        1 + 0.8 + 0.56 + 0.28
    )
    with pytest.raises(StatsError):
        expected_speedup([0.8], 1, -0.1)
    with pytest.raises(StatsError):
        expected_tokens_per_pass([1.2], 1)


@pytest.mark.parametrize(
    ("drafts", "drafted", "accepted", "per_position"),
    [
        (10, 30, 31, (10, 10, 11)),  # more accepted than drafted
        (10, 30, 12, (5, 7, 0)),  # a deeper position accepted more often
        (10, 30, 12, (11, 1, 0)),  # position 0 accepted more often than drafted
        (10, 30, 12, (6, 4, 1)),  # per-position does not sum to accepted
        (0, 3, 0, ()),  # drafted tokens without a draft
        (-1, 0, 0, ()),
    ],
)
def test_inconsistent_counters_are_refused(
    drafts: int, drafted: int, accepted: int, per_position: tuple[int, ...]
) -> None:
    with pytest.raises(InconsistentCountersError) as info:
        AcceptanceCounts(drafts, drafted, accepted, per_position)
    assert info.value.to_body().error.code == "inconsistent_counters"


def test_counts_from_a_telemetry_window_and_an_engine_heartbeat() -> None:
    window = TelemetryWindow(
        segment_id=1,
        arm=Arm.SPEC,
        window_start=datetime(2025, 1, 1, tzinfo=UTC),
        window_seconds=60,
        drafts=100,
        drafted_tokens=300,
        accepted_tokens=150,
        accepted_per_position=[70, 50, 30],
    )
    est = estimate_acceptance(window)
    assert est.conditional_rates == pytest.approx((0.7, 50 / 70, 0.6))
    assert est.alpha == pytest.approx(150 / (100 + 150 - 30))
    spec = SpecCounters(
        num_drafts=100,
        num_draft_tokens=300,
        num_accepted_tokens=150,
        accepted_per_position=[70, 50, 30],
    )
    assert AcceptanceCounts.from_spec_counters(spec) == AcceptanceCounts.of(window)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 10_000),
    st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8),
)
def test_measured_depth_tokens_per_pass_is_the_mean_acceptance_length(
    drafts: int, fractions: list[float]
) -> None:
    # Any non-increasing per-position counters a verifier could produce.
    per_position: list[int] = []
    previous = drafts
    for f in fractions:
        previous = int(previous * f)
        per_position.append(previous)
    counts = AcceptanceCounts(
        drafts, drafts * len(per_position), sum(per_position), tuple(per_position)
    )
    est = estimate_acceptance(counts)
    # Telescoping: prod_{j<=i} r_j = n_i / D, so tau(K) = 1 + A / D.
    tau = expected_tokens_per_pass(est.conditional_rates, len(per_position))
    assert tau == pytest.approx(est.mean_acceptance_length, rel=1e-9)
    assert est.alpha is not None and 0.0 <= est.alpha <= 1.0
    assert est.raw_acceptance_ratio is not None and est.raw_acceptance_ratio <= est.alpha + 1e-12
