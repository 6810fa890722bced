"""The simulated histograms the stats tests feed follow the contract's bucket rule."""

import numpy as np

from specwire import LATENCY_BUCKETS_MS
from tests.control.stats.simulate import bucketize


def test_histograms_follow_the_contract_bucket_rule() -> None:
    # A sample equal to an edge belongs to that edge's bucket (counts[i] holds <= edge[i]).
    counts = bucketize(np.array([LATENCY_BUCKETS_MS[5], LATENCY_BUCKETS_MS[5] * 1.001]))
    assert counts[5] == 1 and counts[6] == 1
