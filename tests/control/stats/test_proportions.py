"""Error-rate comparison against scipy, closed forms and simulated arms."""

import math

import numpy as np
import pytest
from scipy import stats

from control.stats import (
    InconsistentCountersError,
    InsufficientSamplesError,
    compare_error_rates,
    fisher_greater,
    two_proportion_z,
)

LEVEL = 0.05


@pytest.mark.parametrize(
    ("es", "ns", "eb", "nb"), [(30, 1000, 15, 1000), (12, 400, 20, 900), (5, 50, 9, 60)]
)
def test_z_test_is_the_closed_form_and_squares_to_pearson_chi_square(
    es: int, ns: int, eb: int, nb: int
) -> None:
    z, p = two_proportion_z(es, ns, eb, nb)
    pooled = (es + eb) / (ns + nb)
    by_hand = (es / ns - eb / nb) / math.sqrt(pooled * (1 - pooled) * (1 / ns + 1 / nb))
    assert z == pytest.approx(by_hand, rel=1e-12)
    assert p == pytest.approx(0.5 * math.erfc(by_hand / math.sqrt(2)), rel=1e-9)
    chi2 = stats.chi2_contingency([[es, ns - es], [eb, nb - eb]], correction=False).statistic
    assert z**2 == pytest.approx(chi2, rel=1e-9)


@pytest.mark.parametrize(
    ("es", "ns", "eb", "nb"), [(3, 100, 1, 100), (0, 20, 4, 25), (7, 30, 0, 40), (50, 60, 10, 60)]
)
def test_fisher_matches_scipy(es: int, ns: int, eb: int, nb: int) -> None:
    odds, p = fisher_greater(es, ns, eb, nb)
    ref = stats.fisher_exact([[es, ns - es], [eb, nb - eb]], alternative="greater")
    assert p == pytest.approx(ref.pvalue, rel=1e-9)
    assert odds == pytest.approx(ref.statistic)


def test_auto_uses_fisher_for_small_expected_counts() -> None:
    small = compare_error_rates(3, 100, 1, 100)
    assert small.method == "fisher" and not small.worse
    large = compare_error_rates(60, 2000, 30, 2000)
    assert large.method == "z" and large.worse
    assert large.spec_rate == 0.03 and large.difference == pytest.approx(0.015)
    # Only the spec arm being worse counts: a better spec arm is never flagged.
    assert not compare_error_rates(30, 2000, 60, 2000).worse


def test_no_errors_anywhere_is_no_evidence() -> None:
    for method in ("z", "fisher", "auto"):
        result = compare_error_rates(0, 500, 0, 500, method=method)
        assert result.p_value == 1.0 and not result.worse


def test_bad_inputs_are_typed() -> None:
    with pytest.raises(InsufficientSamplesError):
        compare_error_rates(0, 0, 1, 10)
    with pytest.raises(InconsistentCountersError):
        compare_error_rates(11, 10, 1, 10)


@pytest.mark.parametrize(("rate", "n"), [(0.02, 1500), (0.003, 400)])
def test_null_false_alarms_stay_within_the_level(rate: float, n: int) -> None:
    rng = np.random.default_rng(int(rate * 1000) + n)
    comparisons = 1000
    spec = rng.binomial(n, rate, comparisons)
    base = rng.binomial(n, rate, comparisons)
    alarms = np.mean(
        [compare_error_rates(int(s), n, int(b), n).worse for s, b in zip(spec, base, strict=True)]
    )
    assert alarms <= LEVEL + 3 * math.sqrt(LEVEL * (1 - LEVEL) / comparisons)


def test_doubled_error_rate_is_caught() -> None:
    rng = np.random.default_rng(9)
    comparisons, n = 500, 2000
    spec = rng.binomial(n, 0.04, comparisons)
    base = rng.binomial(n, 0.02, comparisons)
    caught = np.mean(
        [compare_error_rates(int(s), n, int(b), n).worse for s, b in zip(spec, base, strict=True)]
    )
    assert caught >= 0.95
