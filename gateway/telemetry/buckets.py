"""Bucketing into the contract's fixed log-spaced latency edges.

The one place that maps a latency to a bucket, used by the aggregator and by
tests, so that "counts[i] holds samples <= edge[i] and > edge[i-1]" has a
single implementation.
"""

from bisect import bisect_left

from specwire import LATENCY_BUCKETS_MS

OVERFLOW_INDEX = len(LATENCY_BUCKETS_MS)


def bucket_index(value_ms: float) -> int:
    """Index of the first edge >= value_ms; the overflow index past the last edge.

    NOTE: bisect_left puts a value equal to an edge into that edge's bucket, which
    is the contract's "<= edge[i]" rule. Negative values (clock steps) land in 0.
    """
    return bisect_left(LATENCY_BUCKETS_MS, value_ms)
