"""Quantiles of latency histograms.

Inputs are bucket counts with the fixed log-spaced edges `LATENCY_BUCKETS_MS`
(10 per decade, each bucket about 26 % wide); the raw samples are never
available. A quantile is read by log-linear interpolation inside its bucket
(samples assumed uniform in log-latency within a bucket; the first and the
overflow bucket above 100 s are given the common log width, so quantiles there
are censored). Counts may be fractional (a histogram reweighted to another
arm's load mix, see `matched.py`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from control.contract.telemetry import LATENCY_BUCKETS_MS, LatencyHistogram

_EDGES = np.asarray(LATENCY_BUCKETS_MS, dtype=np.float64)
_STEP = _EDGES[1] / _EDGES[0]
# Bucket i spans (lower[i], upper[i]]; the first and the overflow bucket are
# given the common log width so interpolation stays finite.
_UPPER = np.append(_EDGES, _EDGES[-1] * _STEP)  # [buckets]
_LOWER = np.insert(_EDGES, 0, _EDGES[0] / _STEP)  # [buckets]


def histogram_counts(histogram: LatencyHistogram) -> NDArray[np.int64]:
    return np.asarray(histogram.counts, dtype=np.int64)  # [buckets]


def quantile_from_counts(
    counts: NDArray[np.int64] | NDArray[np.float64], q: float
) -> NDArray[np.float64]:
    """Quantile q of histograms with log-linear interpolation in the bucket.

    counts: [..., buckets]; returns [...] in milliseconds.
    """
    assert counts.shape[-1] == _UPPER.shape[0], counts.shape
    return _interpolated_quantile(counts, q, _LOWER, _UPPER)


def _interpolated_quantile(
    counts: NDArray[np.int64] | NDArray[np.float64],
    q: float,
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
) -> NDArray[np.float64]:
    """counts: [..., k] over buckets spanning (lower[j], upper[j]]; returns [...]."""
    assert lower.shape == upper.shape == counts.shape[-1:], (lower.shape, counts.shape)
    c = counts.astype(np.float64)  # [..., k]
    cum = np.cumsum(c, axis=-1)  # [..., k]
    target = q * cum[..., -1:]  # [..., 1]
    bucket = np.minimum(np.sum(cum < target, axis=-1), c.shape[-1] - 1)  # [...]
    b = bucket[..., None]
    inside = np.take_along_axis(c, b, axis=-1)[..., 0]  # [...]
    below = np.take_along_axis(cum, b, axis=-1)[..., 0] - inside  # [...]
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(inside > 0, (target[..., 0] - below) / inside, 0.0)
    lo, hi = lower[bucket], upper[bucket]
    return np.asarray(lo * (hi / lo) ** np.clip(frac, 0.0, 1.0), dtype=np.float64)
