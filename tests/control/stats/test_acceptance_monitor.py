"""The acceptance monitor: design effect against a direct computation, and its error rates
when positions within a request are correlated (the request, not the position, is the unit)."""

import numpy as np
import pytest

from control.stats import SprtConfig, SprtDecision, design_effect, monitor_acceptance
from control.stats.panel import ACCEPTANCE_FIELDS, ArmPanel, empty_panel

CONFIG = SprtConfig(
    acceptable_rate=0.4, unacceptable_rate=0.3, alpha=0.01, beta=0.05, min_trials=50
)


def _requests(
    rng: np.random.Generator, rate: float, n: int, concentration: float | None, positions: int
) -> tuple[np.ndarray, np.ndarray]:
    """(accepted a_r, judged t_r) per request; concentration None: independent positions,
    else each request draws its own rate from Beta(c rate, c (1 - rate))."""
    judged = rng.integers(positions // 2, positions + 1, n)
    rates = (
        np.full(n, rate)
        if concentration is None
        else rng.beta(concentration * rate, concentration * (1 - rate), n)
    )
    return rng.binomial(judged, rates), judged


def _moments(accepted: np.ndarray, judged: np.ndarray) -> np.ndarray:
    return np.asarray(
        [
            len(accepted),
            judged.sum(),
            accepted.sum(),
            (accepted**2).sum(),
            (accepted * judged).sum(),
            (judged**2).sum(),
        ],
        np.int64,
    )


def _panel(accepted: np.ndarray, judged: np.ndarray, per_slot: int) -> ArmPanel:
    slots = len(accepted) // per_slot
    panel = empty_panel(slots)
    for t in range(slots):
        part = slice(t * per_slot, (t + 1) * per_slot)
        panel.acceptance[t] = _moments(accepted[part], judged[part])
    return panel


def test_design_effect_matches_the_cluster_variance_ratio() -> None:
    rng = np.random.default_rng(1)
    accepted, judged = _requests(rng, 0.6, 400, concentration=4.0, positions=60)
    p = accepted.sum() / judged.sum()
    n = len(accepted)
    direct = n / (n - 1) * np.sum((accepted - p * judged) ** 2) / (p * (1 - p) * judged.sum())
    assert design_effect(_moments(accepted, judged)) == pytest.approx(direct)
    assert direct > 5  # strongly correlated positions
    independent = design_effect(_moments(*_requests(rng, 0.6, 4000, None, 60)))
    assert independent == pytest.approx(1.0, abs=0.1)
    # Undefined cases fall back to 1 (no inflation claimed without evidence).
    assert design_effect(np.zeros(len(ACCEPTANCE_FIELDS), np.int64)) == 1.0


def test_38_requests_holding_5241_positions_weigh_as_few_positions() -> None:
    rng = np.random.default_rng(2)
    accepted, judged = _requests(rng, 0.55, 38, concentration=2.0, positions=276)
    monitor = monitor_acceptance(
        _panel(accepted, judged, 2), CONFIG, horizon_blocks=1000, min_block_requests=10
    )
    assert monitor.judged_positions > 4000
    assert monitor.effective_positions < monitor.judged_positions / 5
    # Under the minimum number of requests: never accepted, whatever the positions say.
    assert monitor.decision is not SprtDecision.ACCEPT


@pytest.mark.parametrize("correct", [True, False])
def test_false_rejections_at_the_acceptable_rate_need_the_correction(correct: bool) -> None:
    rng = np.random.default_rng(3)
    runs, rejected = 300, 0
    for _ in range(runs):
        # True rate 0.4 = acceptable_rate, the edge of H0; strong per-request correlation.
        accepted, judged = _requests(rng, 0.4, 400, concentration=3.0, positions=60)
        panel = _panel(accepted, judged, 10)
        if not correct:
            # What counting positions as independent trials amounts to: every position a
            # request of its own (t_r = 1), so the design effect comes out as 1.
            judged_n, accepted_n = panel.acceptance[:, 1].copy(), panel.acceptance[:, 2].copy()
            panel.acceptance[:] = np.stack(
                [judged_n, judged_n, accepted_n, accepted_n, accepted_n, judged_n], axis=1
            )
        monitor = monitor_acceptance(panel, CONFIG, horizon_blocks=100, min_block_requests=10)
        rejected += monitor.decision is SprtDecision.REJECT
    if correct:
        assert rejected / runs <= CONFIG.alpha
    else:
        assert rejected / runs > 5 * CONFIG.alpha


def test_monitor_rejects_a_weak_pair_and_accepts_a_good_one() -> None:
    rng = np.random.default_rng(4)
    weak = monitor_acceptance(
        _panel(*_requests(rng, 0.2, 300, 4.0, 60), 10),
        CONFIG,
        horizon_blocks=1000,
        min_block_requests=10,
    )
    assert weak.decision is SprtDecision.REJECT and weak.alarm_block is not None
    assert weak.cusum_peak >= weak.reject_threshold
    good = monitor_acceptance(
        _panel(*_requests(rng, 0.7, 300, 4.0, 60), 10),
        CONFIG,
        horizon_blocks=1000,
        min_block_requests=10,
    )
    assert good.decision is SprtDecision.ACCEPT
    assert good.cumulative_llr <= good.accept_boundary
    assert len(good.increments) == good.blocks == 30


def test_a_collapse_after_a_long_good_period_is_still_caught() -> None:
    rng = np.random.default_rng(5)
    good = _requests(rng, 0.7, 2000, 4.0, 60)
    bad = _requests(rng, 0.15, 100, 4.0, 60)
    accepted = np.concatenate([good[0], bad[0]])
    judged = np.concatenate([good[1], bad[1]])
    monitor = monitor_acceptance(
        _panel(accepted, judged, 10), CONFIG, horizon_blocks=1000, min_block_requests=10
    )
    # The cumulative LLR still says "acceptable"; the CUSUM restarts and rejects.
    assert monitor.cumulative_llr < 0
    assert monitor.decision is SprtDecision.REJECT
    assert monitor.alarm_block is not None and monitor.alarm_block >= 200
