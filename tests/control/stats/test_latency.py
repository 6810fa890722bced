"""Histogram latency comparison against scipy, closed forms and simulated arms."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy import stats

from control.contract import LATENCY_BUCKETS_MS, LatencyHistogram
from control.stats import (
    InsufficientSamplesError,
    compare_latency,
    mann_whitney_counts,
    median_speedup,
    quantile_from_counts,
)
from tests.control.stats.simulate import BUCKETS, bucketize, lognormal_histograms

LEVEL = 0.05
STEP = 10**0.1  # ratio between consecutive bucket edges


def _expanded(counts: NDArray[np.int64]) -> NDArray[np.float64]:
    """The samples as scipy sees them: one value per bucket, so a bucket is a tie group."""
    return np.repeat(np.arange(BUCKETS, dtype=np.float64), counts)


@pytest.mark.parametrize("alternative", ["greater", "less", "two-sided"])
@pytest.mark.parametrize(("n", "m"), [(5, 7), (200, 300), (2000, 1500)])
def test_mann_whitney_matches_scipy_on_expanded_samples(alternative: str, n: int, m: int) -> None:
    rng = np.random.default_rng(n + m)
    spec = lognormal_histograms(rng, 45.0, 0.6, n, 1)[0]
    base = lognormal_histograms(rng, 40.0, 0.6, m, 1)[0]
    ours = mann_whitney_counts(spec, base, alternative)  # type: ignore[arg-type]
    ref = stats.mannwhitneyu(
        _expanded(spec), _expanded(base), alternative=alternative, method="asymptotic"
    )
    assert ours.u_spec == pytest.approx(ref.statistic, rel=1e-12)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)
    assert ours.n_spec == n and ours.n_baseline == m


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 6), min_size=BUCKETS, max_size=BUCKETS).filter(lambda c: sum(c) > 0),
    st.lists(st.integers(0, 6), min_size=BUCKETS, max_size=BUCKETS).filter(lambda c: sum(c) > 0),
)
def test_mann_whitney_matches_scipy_on_arbitrary_histograms(
    spec: list[int], base: list[int]
) -> None:
    x, y = np.array(spec), np.array(base)
    ours = mann_whitney_counts(x, y, "two-sided")
    if np.count_nonzero(x + y) == 1:
        # Every sample tied: scipy divides by a zero variance; we report no evidence.
        assert (ours.z, ours.p_value) == (0.0, 1.0)
        return
    ref = stats.mannwhitneyu(_expanded(x), _expanded(y), method="asymptotic")
    assert ours.u_spec == pytest.approx(ref.statistic, rel=1e-12)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9)


def test_u_counts_pairs_where_spec_is_slower() -> None:
    spec = np.zeros(BUCKETS, np.int64)
    base = np.zeros(BUCKETS, np.int64)
    spec[[10, 20]] = [1, 2]  # one fast, two slow
    base[[10, 15]] = [1, 1]
    # Pairs (spec, base): fast-vs-10 tie (0.5), fast-vs-15 faster (0),
    # each slow one beats both baselines (2 x 2 = 4).
    result = mann_whitney_counts(spec, base)
    assert result.u_spec == 4.5
    assert result.prob_spec_slower == pytest.approx(4.5 / 6)


def test_quantile_interpolates_log_linearly_inside_a_bucket() -> None:
    counts = np.zeros(BUCKETS, np.int64)
    counts[31] = 10  # bucket (edge[30], edge[31]] = (10 ms, 12.59 ms]
    lo, hi = LATENCY_BUCKETS_MS[30], LATENCY_BUCKETS_MS[31]
    assert float(quantile_from_counts(counts, 0.5)) == pytest.approx(math.sqrt(lo * hi))
    assert float(quantile_from_counts(counts, 0.25)) == pytest.approx(lo * (hi / lo) ** 0.25)
    rng = np.random.default_rng(8)
    big = lognormal_histograms(rng, 37.0, 0.7, 200_000, 1)[0]
    assert float(quantile_from_counts(big, 0.5)) == pytest.approx(37.0, rel=0.01)
    assert float(quantile_from_counts(big, 0.9)) == pytest.approx(
        37.0 * math.exp(0.7 * stats.norm.ppf(0.9)), rel=0.02
    )


def test_speedup_of_a_histogram_shifted_by_one_bucket_is_one_bucket_ratio() -> None:
    rng = np.random.default_rng(2)
    base = lognormal_histograms(rng, 80.0, 0.4, 5000, 1)[0]
    spec = np.roll(base, -1)  # every sample one bucket faster: exactly x 1/10^0.1
    assert spec[-1] == 0 and base[0] == 0
    estimate = median_speedup(spec, base, confidence=0.95, resamples=1000)
    # Edges are rounded to 0.1 us in the contract, hence not exactly 10^0.1 apart.
    assert estimate.speedup == pytest.approx(STEP, rel=1e-5)
    assert estimate.lower < STEP < estimate.upper
    assert estimate.lower > 1.0
    assert median_speedup(spec, base, 0.95, 1000).model_dump() == estimate.model_dump()


def test_empty_arm_is_insufficient_evidence() -> None:
    empty = LatencyHistogram()
    one = LatencyHistogram(counts=[0] * 30 + [3] + [0] * (BUCKETS - 31))
    with pytest.raises(InsufficientSamplesError) as info:
        compare_latency(empty, one, "tpot")
    assert info.value.to_body().error.type == "missing_evidence"
    with pytest.raises(InsufficientSamplesError):
        median_speedup(one, empty)


def test_null_arms_raise_false_alarms_at_most_at_the_level() -> None:
    rng = np.random.default_rng(101)
    comparisons = 1000
    spec = lognormal_histograms(rng, 40.0, 0.5, 200, comparisons)  # [comparisons, buckets]
    base = lognormal_histograms(rng, 40.0, 0.5, 200, comparisons)
    p = np.array([mann_whitney_counts(s, b).p_value for s, b in zip(spec, base, strict=True)])
    tolerance = 3 * math.sqrt(LEVEL * (1 - LEVEL) / comparisons)
    assert np.mean(p < LEVEL) <= LEVEL + tolerance


def test_null_speedup_interval_excludes_one_at_about_the_nominal_rate() -> None:
    rng = np.random.default_rng(102)
    comparisons, confidence = 250, 0.9
    spec = lognormal_histograms(rng, 40.0, 0.5, 200, comparisons)
    base = lognormal_histograms(rng, 40.0, 0.5, 200, comparisons)
    outside = [
        not (e.lower <= 1.0 <= e.upper)
        for e in (
            median_speedup(s, b, confidence, resamples=500, seed=i)
            for i, (s, b) in enumerate(zip(spec, base, strict=True))
        )
    ]
    miss = 1 - confidence
    assert np.mean(outside) <= miss + 3 * math.sqrt(miss * (1 - miss) / comparisons)


def test_spec_arm_twenty_percent_slower_is_caught() -> None:
    rng = np.random.default_rng(103)
    comparisons = 200
    spec = lognormal_histograms(rng, 48.0, 0.5, 300, comparisons)
    base = lognormal_histograms(rng, 40.0, 0.5, 300, comparisons)
    results = [
        compare_latency(
            LatencyHistogram(counts=s.tolist()),
            LatencyHistogram(counts=b.tolist()),
            "e2e",
            resamples=500,
            seed=i,
        )
        for i, (s, b) in enumerate(zip(spec, base, strict=True))
    ]
    assert np.mean([r.regression for r in results]) >= 0.95
    # The guard's trigger: the speedup's upper bound below 1.
    assert np.mean([r.speedup.upper < 1.0 for r in results]) >= 0.9
    assert np.median([r.speedup.speedup for r in results]) == pytest.approx(1 / 1.2, rel=0.03)


def test_real_speedup_interval_covers_the_true_ratio() -> None:
    rng = np.random.default_rng(104)
    comparisons, confidence = 200, 0.9
    spec = lognormal_histograms(rng, 40.0, 0.5, 300, comparisons)
    base = lognormal_histograms(rng, 60.0, 0.5, 300, comparisons)
    estimates = [
        median_speedup(s, b, confidence, resamples=500, seed=i)
        for i, (s, b) in enumerate(zip(spec, base, strict=True))
    ]
    assert all(e.lower > 1.0 for e in estimates)
    covered = np.mean([e.lower <= 1.5 <= e.upper for e in estimates])
    assert covered >= confidence - 3 * math.sqrt(confidence * (1 - confidence) / comparisons)


def test_histograms_follow_the_contract_bucket_rule() -> None:
    # A sample equal to an edge belongs to that edge's bucket (counts[i] holds <= edge[i]).
    counts = bucketize(np.array([LATENCY_BUCKETS_MS[5], LATENCY_BUCKETS_MS[5] * 1.001]))
    assert counts[5] == 1 and counts[6] == 1
