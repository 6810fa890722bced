"""Spec vs baseline latency compared only at matched load, in blocks for the monitors.

The two arms run on different pools: at a 1 % canary the spec pool is nearly
idle while the baseline pool carries the segment, at `full` the reverse. A raw
comparison would credit (or blame) speculation for the load. So every latency
comparison is *stratified by load bucket* (the requests already in flight on
the worker at dispatch): within bucket b the difference of mean log latencies
d_b = mean_spec_b - mean_base_b is formed, with variance
v_b = s_spec^2 / n_spec_b + s_base^2 / n_base_b (s^2 each arm's pooled
within-bucket variance of log latency), and the buckets where both arms have
requests are combined with inverse-variance weights:

    d = sum_b (d_b / v_b) / sum_b (1 / v_b),    var(d) = 1 / sum_b (1 / v_b).

NOTE: not with the spec arm's load mix as weights: at `full` the spec arm has
most of its requests at loads the small holdout rarely meets, and a bucket
with one baseline request would then dominate the variance. Inverse-variance
weights let the buckets both arms populate well carry the comparison. d > 0 means
the spec arm is slower; exp(-d) is the speedup (a ratio of geometric means:
one slow outlier cannot move it the way it moves a mean, and unlike TPOT,
end-to-end time per token cannot read near zero when a stream arrives in a
burst).

Blocks: consecutive time slots are gathered until both arms hold at least
`min_requests` matched requests, so every block estimate is a mean of enough
requests to be close to Gaussian (tiny traffic simply makes longer blocks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from control.stats.latency import quantile_from_counts
from control.stats.panel import N_STRATA, ArmPanel
from control.stats.sequential import BlockEstimate

# NOTE: a floor on per-request log-latency variance: no two real requests take
# exactly the same time, and a zero would make a block's variance zero.
MIN_LOG_VARIANCE = 1e-4
_LOAD_INDEX = np.arange(N_STRATA)
_BLOCK_MIN_DOF = 5


@dataclass(frozen=True, slots=True)
class MatchedDifference:
    estimate: float  # load-matched mean log(spec) - mean log(baseline)
    variance: float
    spec_requests: int  # in the matched buckets
    baseline_requests: int


def pooled_log_variance(moments: NDArray[np.float64], min_dof: int = 2) -> float | None:
    """Pooled within-bucket variance of log latency; moments: [..., N_STRATA, 3]."""
    assert moments.shape[-2:] == (N_STRATA, 3), moments.shape
    sums = moments.reshape(-1, N_STRATA, 3).sum(axis=0)  # [N_STRATA, 3]
    n, s1, s2 = sums[:, 0], sums[:, 1], sums[:, 2]
    filled = n > 0
    dof = float(n.sum()) - int(filled.sum())
    if dof < min_dof:
        return None
    within = s2[filled] - s1[filled] ** 2 / n[filled]
    return max(float(within.sum()) / dof, MIN_LOG_VARIANCE)


def matched_difference(
    spec: NDArray[np.float64],
    baseline: NDArray[np.float64],
    spec_variance: float,
    baseline_variance: float,
    min_bucket: int = 0,
) -> MatchedDifference | None:
    """Stratified difference over load buckets >= min_bucket; spec/baseline: [N_STRATA, 3]."""
    assert spec.shape == baseline.shape == (N_STRATA, 3), (spec.shape, baseline.shape)
    ns, nb = spec[:, 0], baseline[:, 0]
    matched = (ns > 0) & (nb > 0) & (min_bucket <= _LOAD_INDEX)
    if not matched.any():
        return None
    ns_m, nb_m = ns[matched], nb[matched]
    gaps = spec[matched, 1] / ns_m - baseline[matched, 1] / nb_m
    information = 1.0 / (spec_variance / ns_m + baseline_variance / nb_m)  # [matched]
    total = float(information.sum())
    return MatchedDifference(
        estimate=float(np.sum(information * gaps) / total),
        variance=1.0 / total,
        spec_requests=int(ns_m.sum()),
        baseline_requests=int(nb_m.sum()),
    )


def latency_blocks(
    spec: ArmPanel,
    baseline: ArmPanel,
    metric: int,
    *,
    min_requests: int,
    spec_variance: float,
    baseline_variance: float,
    min_bucket: int = 0,
    first: int = 0,
) -> list[BlockEstimate]:
    """Matched log-latency differences, one per block of >= min_requests matched requests
    per arm; the slots after the last complete block are pending (not returned).

    Each block's variances are its own arms' within-bucket variances (the given ones
    only when a block has too few degrees of freedom): a variance pooled over the whole
    exposure would mix a latency that changed over time (a regression, a new stage)
    into the spread and blunt the very change the monitor looks for.
    """
    blocks: list[BlockEstimate] = []
    acc_s = np.zeros((N_STRATA, 3))
    acc_b = np.zeros((N_STRATA, 3))
    start = first
    for t in range(first, spec.slots):
        acc_s += spec.moments[t, :, metric]
        acc_b += baseline.moments[t, :, metric]
        diff = matched_difference(acc_s, acc_b, spec_variance, baseline_variance, min_bucket)
        if (
            diff is not None
            and diff.spec_requests >= min_requests
            and diff.baseline_requests >= min_requests
        ):
            block_spec = pooled_log_variance(acc_s, _BLOCK_MIN_DOF) or spec_variance
            block_base = pooled_log_variance(acc_b, _BLOCK_MIN_DOF) or baseline_variance
            diff = matched_difference(acc_s, acc_b, block_spec, block_base, min_bucket)
            assert diff is not None
            blocks.append(BlockEstimate(diff.estimate, diff.variance, start, t))
            acc_s = np.zeros((N_STRATA, 3))
            acc_b = np.zeros((N_STRATA, 3))
            start = t + 1
    return blocks


def error_blocks(
    spec: ArmPanel, baseline: ArmPanel, *, min_requests: int, first: int = 0
) -> list[BlockEstimate]:
    """Error-rate differences (spec - baseline) per block of >= min_requests requests per
    arm. The variance uses each arm's own rate over all slots read, smoothed as
    (errors + 1) / (requests + 2) so that error-free arms do not make it zero.

    NOTE: per arm, not pooled: at `full` the small holdout's rate is the noisy term, and a
    pooled rate dominated by the spec arm would misstate it.
    """
    spec_rate = _smoothed_rate(spec, first)
    base_rate = _smoothed_rate(baseline, first)
    blocks: list[BlockEstimate] = []
    es = eb = ns = nb = 0
    start = first
    for t in range(first, spec.slots):
        es += int(spec.errors[t])
        eb += int(baseline.errors[t])
        ns += int(spec.requests[t])
        nb += int(baseline.requests[t])
        if ns >= min_requests and nb >= min_requests:
            variance = spec_rate * (1 - spec_rate) / ns + base_rate * (1 - base_rate) / nb
            blocks.append(BlockEstimate(es / ns - eb / nb, variance, start, t))
            es = eb = ns = nb = 0
            start = t + 1
    return blocks


def _smoothed_rate(panel: ArmPanel, first: int) -> float:
    return float(panel.errors[first:].sum() + 1) / float(panel.requests[first:].sum() + 2)


def matched_quantile_ratio(
    spec_counts: NDArray[np.int32],
    baseline_counts: NDArray[np.int32],
    q: float,
    min_bucket: int = 0,
) -> tuple[float, float] | None:
    """(spec, baseline) quantile q at matched load: the baseline's per-bucket histograms are
    reweighted to the spec arm's load mix. counts: [N_STRATA, buckets]."""
    ns = spec_counts.sum(axis=1).astype(np.float64)  # [N_STRATA]
    nb = baseline_counts.sum(axis=1).astype(np.float64)  # [N_STRATA]
    matched = (ns > 0) & (nb > 0) & (min_bucket <= _LOAD_INDEX)
    if not matched.any():
        return None
    spec_mix = spec_counts[matched].sum(axis=0)  # [buckets]
    scale = ns[matched] / nb[matched]  # [matched]
    base_mix = (baseline_counts[matched] * scale[:, None]).sum(axis=0)  # [buckets]
    return (
        float(quantile_from_counts(spec_mix, q)),
        float(quantile_from_counts(base_mix, q)),
    )


def projected_spec_load(
    *,
    load_now: float,
    share_now: float,
    share_next: float,
    segment_rate_per_s: float,
    spec_latency_s: float,
    spec_workers: int,
) -> float:
    """Per-worker load of the spec pool at the next stage (Little's law): today's load plus
    the extra requests in flight when the segment's share on the spec arm grows from
    share_now to share_next percent."""
    extra_rate = max(share_next - share_now, 0.0) / 100.0 * segment_rate_per_s
    return load_now + extra_rate * spec_latency_s / max(spec_workers, 1)
