"""Histogram quantiles against closed forms and large simulated samples."""

import math

import numpy as np
import pytest
from scipy import stats

from control.contract import LATENCY_BUCKETS_MS
from control.stats import quantile_from_counts
from tests.control.stats.simulate import BUCKETS, bucketize, lognormal_histograms


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


def test_histograms_follow_the_contract_bucket_rule() -> None:
    # A sample equal to an edge belongs to that edge's bucket (counts[i] holds <= edge[i]).
    counts = bucketize(np.array([LATENCY_BUCKETS_MS[5], LATENCY_BUCKETS_MS[5] * 1.001]))
    assert counts[5] == 1 and counts[6] == 1
