"""Error-rate comparison between the spec arm and the baseline arm.

Rate of an arm = errors / requests over the compared windows. Client
cancellations are counted separately by the gateway and are not errors.

One-sided question: is the spec arm's error rate higher than the baseline's?

- Two-proportion z-test with the pooled rate p = (e_s + e_b) / (n_s + n_b):
  z = (p_s - p_b) / sqrt(p (1 - p) (1 / n_s + 1 / n_b)), p-value = P(Z >= z).
  z^2 is the uncorrected Pearson chi-square of the 2x2 table. Assumes
  independent requests and enough expected counts for the normal limit.
- Fisher's exact test, used when any expected cell count (under the pooled
  rate) is below 5: conditional on the margins, the spec arm's error count is
  hypergeometric (population n_s + n_b, e_s + e_b errors, n_s drawn), and the
  p-value is P(X >= e_s).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict
from scipy import stats

from control.stats.errors import InconsistentCountersError, InsufficientSamplesError

Method = Literal["z", "fisher"]

# Classic rule for the normal approximation of a 2x2 table.
MIN_EXPECTED_COUNT = 5.0


class ProportionComparison(BaseModel):
    model_config = ConfigDict(frozen=True)

    method: Method
    statistic: float  # z for the z-test, the sample odds ratio for Fisher (inf if undefined)
    p_value: float
    level: float
    spec_errors: int
    spec_total: int
    baseline_errors: int
    baseline_total: int
    spec_rate: float
    baseline_rate: float
    difference: float  # spec_rate - baseline_rate
    worse: bool  # spec error rate significantly higher at `level`


def two_proportion_z(
    spec_errors: int, spec_total: int, baseline_errors: int, baseline_total: int
) -> tuple[float, float]:
    """(z, one-sided p-value) of the pooled two-proportion z-test; (0, 1) when no variance."""
    _check(spec_errors, spec_total, baseline_errors, baseline_total)
    pooled = (spec_errors + baseline_errors) / (spec_total + baseline_total)
    variance = pooled * (1 - pooled) * (1 / spec_total + 1 / baseline_total)
    if variance == 0:
        # No error anywhere, or only errors: nothing distinguishes the arms.
        return 0.0, 1.0
    z = (spec_errors / spec_total - baseline_errors / baseline_total) / math.sqrt(variance)
    return z, float(stats.norm.sf(z))


def fisher_greater(
    spec_errors: int, spec_total: int, baseline_errors: int, baseline_total: int
) -> tuple[float, float]:
    """(sample odds ratio, one-sided p-value P(X >= spec_errors)) of Fisher's exact test."""
    _check(spec_errors, spec_total, baseline_errors, baseline_total)
    population = spec_total + baseline_total
    errors = spec_errors + baseline_errors
    p = float(stats.hypergeom.sf(spec_errors - 1, population, errors, spec_total))
    spec_ok, base_ok = spec_total - spec_errors, baseline_total - baseline_errors
    denominator = spec_ok * baseline_errors
    odds_ratio = spec_errors * base_ok / denominator if denominator else math.inf
    return odds_ratio, min(1.0, p)


def compare_error_rates(
    spec_errors: int,
    spec_total: int,
    baseline_errors: int,
    baseline_total: int,
    level: float = 0.05,
    method: Method | Literal["auto"] = "auto",
) -> ProportionComparison:
    """Is the spec arm's error rate higher? z-test, or Fisher when counts are small."""
    _check(spec_errors, spec_total, baseline_errors, baseline_total)
    if method == "auto":
        method = (
            "fisher"
            if _min_expected(spec_errors, spec_total, baseline_errors, baseline_total)
            < MIN_EXPECTED_COUNT
            else "z"
        )
    if method == "z":
        statistic, p = two_proportion_z(spec_errors, spec_total, baseline_errors, baseline_total)
    else:
        statistic, p = fisher_greater(spec_errors, spec_total, baseline_errors, baseline_total)
    spec_rate = spec_errors / spec_total
    baseline_rate = baseline_errors / baseline_total
    return ProportionComparison(
        method=method,
        statistic=statistic,
        p_value=p,
        level=level,
        spec_errors=spec_errors,
        spec_total=spec_total,
        baseline_errors=baseline_errors,
        baseline_total=baseline_total,
        spec_rate=spec_rate,
        baseline_rate=baseline_rate,
        difference=spec_rate - baseline_rate,
        worse=p < level,
    )


def _min_expected(
    spec_errors: int, spec_total: int, baseline_errors: int, baseline_total: int
) -> float:
    pooled = (spec_errors + baseline_errors) / (spec_total + baseline_total)
    smaller_arm = min(spec_total, baseline_total)
    return smaller_arm * min(pooled, 1 - pooled)


def _check(spec_errors: int, spec_total: int, baseline_errors: int, baseline_total: int) -> None:
    if spec_total <= 0 or baseline_total <= 0:
        raise InsufficientSamplesError(
            f"both arms need requests (spec={spec_total}, baseline={baseline_total})"
        )
    if not (0 <= spec_errors <= spec_total and 0 <= baseline_errors <= baseline_total):
        raise InconsistentCountersError("errors must lie between 0 and the number of requests")
