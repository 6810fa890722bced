"""Spec arm vs baseline arm latency (TPOT or end-to-end) on bucketed histograms.

Inputs are `LatencyHistogram`s with the fixed log-spaced edges
`LATENCY_BUCKETS_MS` (10 per decade, each bucket about 26 % wide), summed over
the windows being compared; the raw samples are never available.

Mann-Whitney U with ties, from bucket counts: all samples in one bucket are
treated as tied (they are indistinguishable after bucketing). With x = spec
counts and y = baseline counts per bucket,

    U_spec = sum_i x_i (sum_{j<i} y_j + y_i / 2)

is the number of (spec, baseline) pairs where the spec sample is slower, ties
counting one half; U_spec / (n m) estimates P(spec slower) + P(tie) / 2. The
null mean is n m / 2, the tie-corrected variance
n m / 12 ((N + 1) - sum_i (t_i^3 - t_i) / (N (N - 1))) with t_i = x_i + y_i,
and the p-value uses the normal approximation with continuity correction,
exactly as scipy.stats.mannwhitneyu(method="asymptotic") does on the
expanded samples. Assumptions: samples independent within and between arms
(one sample per request for e2e; TPOT is per request too).

Speedup = median(baseline) / median(spec), each median read from the
histogram by log-linear interpolation inside its bucket (samples assumed
uniform in log-latency within a bucket; the overflow bucket above 100 s is
treated as one more bucket of the same width, so medians there are censored).
Its confidence interval is a percentile bootstrap: each arm's histogram is
resampled as Multinomial(n, observed bucket frequencies), B times, and the
ratio of interpolated medians recomputed. The generator is seeded so that the
same evidence always yields the same interval (decisions are reproducible).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict
from scipy import special

from control.contract.telemetry import LATENCY_BUCKETS_MS, LatencyHistogram
from control.stats.errors import InsufficientSamplesError

Alternative = Literal["greater", "less", "two-sided"]

_EDGES = np.asarray(LATENCY_BUCKETS_MS, dtype=np.float64)
_STEP = _EDGES[1] / _EDGES[0]
# Bucket i spans (lower[i], upper[i]]; the first and the overflow bucket are
# given the common log width so interpolation stays finite.
_UPPER = np.append(_EDGES, _EDGES[-1] * _STEP)  # [buckets]
_LOWER = np.insert(_EDGES, 0, _EDGES[0] / _STEP)  # [buckets]


class MannWhitneyResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    u_spec: float
    z: float
    p_value: float
    alternative: Alternative
    n_spec: int
    n_baseline: int
    prob_spec_slower: float


class SpeedupEstimate(BaseModel):
    """Median ratio baseline / spec with its bootstrap confidence interval."""

    model_config = ConfigDict(frozen=True)

    speedup: float
    lower: float
    upper: float
    confidence: float
    median_spec_ms: float
    median_baseline_ms: float
    n_spec: int
    n_baseline: int
    resamples: int
    seed: int


class LatencyComparison(BaseModel):
    """Evidence for one latency metric: regression test plus speedup interval."""

    model_config = ConfigDict(frozen=True)

    metric: str
    level: float
    mann_whitney: MannWhitneyResult
    speedup: SpeedupEstimate
    regression: bool  # spec significantly slower at `level` (one-sided)


def histogram_counts(histogram: LatencyHistogram) -> NDArray[np.int64]:
    return np.asarray(histogram.counts, dtype=np.int64)  # [buckets]


def mann_whitney_counts(
    spec: NDArray[np.int64] | LatencyHistogram,
    baseline: NDArray[np.int64] | LatencyHistogram,
    alternative: Alternative = "greater",
) -> MannWhitneyResult:
    """Mann-Whitney U on two bucket-count vectors; "greater" = spec slower."""
    x = _counts(spec)  # [buckets]
    y = _counts(baseline)  # [buckets]
    assert x.shape == y.shape, (x.shape, y.shape)
    n, m = int(x.sum()), int(y.sum())
    if n == 0 or m == 0:
        raise InsufficientSamplesError(f"Mann-Whitney needs samples in both arms (n={n}, m={m})")
    xf, yf = x.astype(np.float64), y.astype(np.float64)
    y_below = np.concatenate(([0.0], np.cumsum(yf)[:-1]))  # [buckets]
    u_spec = float(np.sum(xf * (y_below + yf / 2)))
    u_baseline = n * m - u_spec
    if alternative == "greater":
        u, factor = u_spec, 1.0
    elif alternative == "less":
        u, factor = u_baseline, 1.0
    else:
        u, factor = max(u_spec, u_baseline), 2.0
    total = n + m
    ties = xf + yf
    tie_term = float(np.sum(ties**3 - ties))
    variance = n * m / 12 * ((total + 1) - tie_term / (total * (total - 1)))
    if variance <= 0:
        # Every sample in one bucket: the arms are indistinguishable.
        z, p = 0.0, 1.0
    else:
        z = (u - n * m / 2 - 0.5) / math.sqrt(variance)
        p = min(1.0, factor * float(special.ndtr(-z)))
    return MannWhitneyResult(
        u_spec=u_spec,
        z=z,
        p_value=p,
        alternative=alternative,
        n_spec=n,
        n_baseline=m,
        prob_spec_slower=u_spec / (n * m),
    )


def quantile_from_counts(counts: NDArray[np.int64], q: float) -> NDArray[np.float64]:
    """Quantile q of histograms with log-linear interpolation in the bucket.

    counts: [..., buckets]; returns [...] in milliseconds.
    """
    assert counts.shape[-1] == _UPPER.shape[0], counts.shape
    return _interpolated_quantile(counts, q, _LOWER, _UPPER)


def _interpolated_quantile(
    counts: NDArray[np.int64], q: float, lower: NDArray[np.float64], upper: NDArray[np.float64]
) -> NDArray[np.float64]:
    """counts: [..., k] over buckets spanning (lower[j], upper[j]]; returns [...]."""
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


def median_speedup(
    spec: NDArray[np.int64] | LatencyHistogram,
    baseline: NDArray[np.int64] | LatencyHistogram,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> SpeedupEstimate:
    """Speedup median(baseline) / median(spec) with a percentile bootstrap interval."""
    x, y = _counts(spec), _counts(baseline)
    n, m = int(x.sum()), int(y.sum())
    if n == 0 or m == 0:
        raise InsufficientSamplesError(f"speedup needs samples in both arms (n={n}, m={m})")
    rng = np.random.default_rng(seed)
    median_spec = float(quantile_from_counts(x, 0.5))
    median_base = float(quantile_from_counts(y, 0.5))
    boot_spec = _bootstrap_medians(rng, x, resamples)  # [resamples]
    boot_base = _bootstrap_medians(rng, y, resamples)  # [resamples]
    ratios = boot_base / boot_spec  # [resamples]
    tail = (1 - confidence) / 2
    lower, upper = np.quantile(ratios, [tail, 1 - tail])
    return SpeedupEstimate(
        speedup=median_base / median_spec,
        lower=float(lower),
        upper=float(upper),
        confidence=confidence,
        median_spec_ms=median_spec,
        median_baseline_ms=median_base,
        n_spec=n,
        n_baseline=m,
        resamples=resamples,
        seed=seed,
    )


def compare_latency(
    spec: LatencyHistogram,
    baseline: LatencyHistogram,
    metric: str,
    level: float = 0.05,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> LatencyComparison:
    """One-sided regression test (spec slower) plus the speedup interval."""
    mwu = mann_whitney_counts(spec, baseline, alternative="greater")
    return LatencyComparison(
        metric=metric,
        level=level,
        mann_whitney=mwu,
        speedup=median_speedup(spec, baseline, confidence, resamples, seed),
        regression=mwu.p_value < level,
    )


def _counts(h: NDArray[np.int64] | LatencyHistogram) -> NDArray[np.int64]:
    c = histogram_counts(h) if isinstance(h, LatencyHistogram) else np.asarray(h, np.int64)
    assert c.shape == (_UPPER.shape[0],), c.shape
    return c


def _bootstrap_medians(
    rng: np.random.Generator, counts: NDArray[np.int64], resamples: int
) -> NDArray[np.float64]:
    """Interpolated medians of `resamples` multinomial resamples of one histogram."""
    occupied = np.flatnonzero(counts)  # [k]
    n = int(counts.sum())
    # NOTE: resampling over the occupied buckets only is the same distribution
    # (empty buckets have probability 0 and never hold a quantile) and several
    # times faster: most of the 62 buckets are empty.
    draws = rng.multinomial(n, counts[occupied] / n, size=resamples)  # [resamples, k]
    return _interpolated_quantile(draws, 0.5, _LOWER[occupied], _UPPER[occupied])
