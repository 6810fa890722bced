"""Depth advice against closed forms and simulated drafting."""

import numpy as np
import pytest

from control.stats import (
    AcceptanceCounts,
    InsufficientSamplesError,
    StatsError,
    advise_depth,
    cost_ratio_from_speedup,
    estimate_acceptance,
    expected_speedup_iid,
)
from tests.control.stats.simulate import accepted_prefix, simulate_counts


@pytest.mark.parametrize(("alpha", "cost"), [(0.5, 0.02), (0.8, 0.1), (0.9, 0.05), (0.95, 0.2)])
def test_iid_rates_pick_the_closed_form_argmax(alpha: float, cost: float) -> None:
    advice = advise_depth([alpha] * 10, cost, k_max=10)
    closed = [expected_speedup_iid(alpha, k, cost) for k in range(1, 11)]
    assert [row.expected_speedup for row in advice.table] == pytest.approx(closed, rel=1e-12)
    assert advice.best_k == int(np.argmax(closed)) + 1
    assert advice.best_expected_speedup == pytest.approx(max(closed))
    assert not any(row.extrapolated for row in advice.table)


def test_decaying_rates_worked_example() -> None:
    # tau = 1.9, 2.44, 2.602, 2.6182; divided by 1.05, 1.10, 1.15, 1.20.
    advice = advise_depth([0.9, 0.6, 0.3, 0.1], cost_ratio=0.05, k_max=4)
    assert [r.expected_tokens_per_pass for r in advice.table] == pytest.approx(
        [1.9, 2.44, 2.602, 2.6182]
    )
    assert [r.expected_speedup for r in advice.table] == pytest.approx(
        [1.9 / 1.05, 2.44 / 1.1, 2.602 / 1.15, 2.6182 / 1.2]
    )
    assert advice.best_k == 3 and advice.speculation_pays


def test_expensive_draft_does_not_pay() -> None:
    advice = advise_depth([0.3, 0.2, 0.1], cost_ratio=1.0, k_max=3)
    assert advice.best_k == 1
    assert advice.best_expected_speedup == pytest.approx(1.3 / 2)
    assert not advice.speculation_pays


def test_ties_prefer_the_shorter_length() -> None:
    # Free drafting and zero acceptance beyond position 0: k = 1..3 all give 1.5.
    advice = advise_depth([0.5, 0.0, 0.0], cost_ratio=0.0, k_max=3)
    assert advice.best_k == 1


def test_unmeasured_depths_are_extrapolated_with_pooled_alpha() -> None:
    counts = AcceptanceCounts(1000, 3000, 1800, (800, 600, 400))
    estimate = estimate_acceptance(counts)
    advice = advise_depth(estimate, cost_ratio=0.02, k_max=6)
    assert advice.fill_rate == estimate.alpha
    assert [r.extrapolated for r in advice.table] == [False] * 3 + [True] * 3
    alpha = 1800 / (1000 + 1800 - 400)
    tau4 = 1 + 0.8 + 0.6 + 0.4 + 0.4 * alpha
    assert advice.table[3].expected_tokens_per_pass == pytest.approx(tau4)
    with pytest.raises(InsufficientSamplesError):
        advise_depth([0.8], cost_ratio=0.1, k_max=2)
    with pytest.raises(InsufficientSamplesError):
        advise_depth(estimate_acceptance(AcceptanceCounts(0, 0, 0)), 0.1, 2)
    with pytest.raises(StatsError):
        advise_depth([0.8], cost_ratio=0.1, k_max=0)


def test_advice_from_simulated_counters_delivers_the_predicted_speedup() -> None:
    rng = np.random.default_rng(21)
    true_rates = np.array([0.92, 0.85, 0.75, 0.6, 0.45, 0.3, 0.2, 0.1])
    cost = 0.08
    estimate = estimate_acceptance(simulate_counts(rng, true_rates, 50_000))
    advice = advise_depth(estimate, cost, k_max=8)
    assert advice.best_k == advise_depth(list(true_rates), cost, k_max=8).best_k
    # Draft with the advised length and measure tokens per unit of target-pass time.
    k = advice.best_k
    tokens = 1 + accepted_prefix(rng, true_rates[:k], 50_000).sum(axis=1)  # [drafts]
    measured = tokens.mean() / (1 + k * cost)
    assert measured == pytest.approx(advice.best_expected_speedup, rel=0.01)


def test_cost_ratio_round_trip() -> None:
    tau = 3.2
    speedup = tau / (1 + 4 * 0.15)
    assert cost_ratio_from_speedup(speedup, tau, 4) == pytest.approx(0.15)
    with pytest.raises(StatsError):
        cost_ratio_from_speedup(0.0, tau, 4)
