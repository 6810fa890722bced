"""Calibration report: error rates, power and sample sizes of the statistics, by simulation.

Not collected by pytest (the tests assert the same properties on smaller runs);
run it for the numbers quoted in reviews (about 10 s of CPU):

    .venv/bin/python -m tests.control.stats.calibration
"""

import numpy as np
from numpy.typing import NDArray

from control.stats import (
    compare_error_rates,
    mann_whitney_counts,
    median_speedup,
    wald_expected_trials,
)
from tests.control.stats.simulate import lognormal_histograms
from tests.control.stats.test_sprt import CONFIG, _first_decisions

COMPARISONS = 2000
BOOTSTRAPS = 400


def _sprt() -> None:
    print(f"SPRT p0={CONFIG.acceptable_rate} p1={CONFIG.unacceptable_rate} alpha=beta=0.05")
    for rate in (0.7, 0.6, 0.5):
        final, trials = _first_decisions(CONFIG, rate, 4000, 200, 25, seed=99)
        print(
            f"  min_trials=200, windows of 25, rate {rate}: P(reject)={np.mean(final == 1):.4f}"
            f" P(accept)={np.mean(final == -1):.4f} mean trials={trials.mean():.0f}"
        )
    per_trial = CONFIG.model_copy(update={"min_trials": 1})
    for rate in (0.7, 0.65, 0.6):
        _, trials = _first_decisions(per_trial, rate, 4000, 1500, 1, seed=98)
        approx = wald_expected_trials(per_trial, rate)
        print(f"  per trial, rate {rate}: mean trials {trials.mean():.1f}, Wald {approx:.1f}")


def _pairs(
    rng: np.random.Generator, spec_ms: float, base_ms: float, n: int, count: int
) -> list[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    spec = lognormal_histograms(rng, spec_ms, 0.5, n, count)
    base = lognormal_histograms(rng, base_ms, 0.5, n, count)
    return list(zip(spec, base, strict=True))


def _latency(rng: np.random.Generator) -> None:
    null = [mann_whitney_counts(s, b).p_value for s, b in _pairs(rng, 40, 40, 200, COMPARISONS)]
    print(f"MWU null n=m=200: false alarms at 0.05 = {np.mean(np.array(null) < 0.05):.4f}")
    slow = [mann_whitney_counts(s, b).p_value for s, b in _pairs(rng, 48, 40, 300, COMPARISONS)]
    print(f"MWU spec 20% slower n=m=300: power at 0.05 = {np.mean(np.array(slow) < 0.05):.4f}")
    null_ci = [
        median_speedup(s, b, 0.9, 1000, i)
        for i, (s, b) in enumerate(_pairs(rng, 40, 40, 200, BOOTSTRAPS))
    ]
    outside = np.mean([not (e.lower <= 1 <= e.upper) for e in null_ci])
    print(f"bootstrap 90% CI, null n=m=200: excludes 1 in {outside:.4f}")
    fast_ci = [
        median_speedup(s, b, 0.9, 1000, i)
        for i, (s, b) in enumerate(_pairs(rng, 40, 60, 300, BOOTSTRAPS))
    ]
    covered = np.mean([e.lower <= 1.5 <= e.upper for e in fast_ci])
    print(f"bootstrap 90% CI, true speedup 1.5 n=m=300: coverage {covered:.4f}")


def _errors(rng: np.random.Generator) -> None:
    for spec_rate, base_rate, n in ((0.02, 0.02, 1500), (0.003, 0.003, 400), (0.04, 0.02, 2000)):
        spec = rng.binomial(n, spec_rate, COMPARISONS)
        base = rng.binomial(n, base_rate, COMPARISONS)
        flagged = np.mean(
            [
                compare_error_rates(int(s), n, int(b), n).worse
                for s, b in zip(spec, base, strict=True)
            ]
        )
        print(f"errors spec {spec_rate} vs baseline {base_rate}, n={n}: flagged {flagged:.4f}")


def main() -> None:
    rng = np.random.default_rng(2024)
    _sprt()
    _latency(rng)
    _errors(rng)


if __name__ == "__main__":
    main()
