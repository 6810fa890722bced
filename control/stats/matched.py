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

import math
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
    assert spec.slots == baseline.slots and 0 <= first <= spec.slots, (
        spec.slots,
        baseline.slots,
        first,
    )
    spec_m = spec.moments[first:, :, metric]  # [T, N_STRATA, 3]
    base_m = baseline.moments[first:, :, metric]  # [T, N_STRATA, 3]
    assert spec_m.shape == base_m.shape and spec_m.shape[1:] == (N_STRATA, 3), spec_m.shape
    bounds = _block_bounds(spec_m[:, :, 0], base_m[:, :, 0], min_requests, min_bucket)
    if not bounds:
        return []
    starts = np.asarray([a for a, _ in bounds])
    spec_b = np.add.reduceat(spec_m, starts, axis=0)[: len(bounds)]  # [B, N_STRATA, 3]
    base_b = np.add.reduceat(base_m, starts, axis=0)[: len(bounds)]  # [B, N_STRATA, 3]
    # reduceat sums up to the next start; the last block ends at its own last slot.
    last_a, last_b = bounds[-1]
    spec_b[-1] = spec_m[last_a : last_b + 1].sum(axis=0)
    base_b[-1] = base_m[last_a : last_b + 1].sum(axis=0)
    var_s = _block_variances(spec_b, spec_variance)  # [B]
    var_b = _block_variances(base_b, baseline_variance)  # [B]
    matched = (spec_b[:, :, 0] > 0) & (base_b[:, :, 0] > 0) & (min_bucket <= _LOAD_INDEX)
    ns = np.where(matched, spec_b[:, :, 0], 1.0)  # [B, N_STRATA]
    nb = np.where(matched, base_b[:, :, 0], 1.0)
    gaps = spec_b[:, :, 1] / ns - base_b[:, :, 1] / nb  # [B, N_STRATA]
    information = np.where(matched, 1.0 / (var_s[:, None] / ns + var_b[:, None] / nb), 0.0)
    total = information.sum(axis=1)  # [B]
    estimates = (information * gaps).sum(axis=1) / total
    return [
        BlockEstimate(float(estimates[i]), float(1.0 / total[i]), first + a, first + b)
        for i, (a, b) in enumerate(bounds)
    ]


def _block_bounds(
    spec_n: NDArray[np.float64], base_n: NDArray[np.float64], min_requests: int, min_bucket: int
) -> list[tuple[int, int]]:
    """(first, last) slots of each complete block: the fewest consecutive slots holding
    >= min_requests matched requests per arm. spec_n, base_n: [T, N_STRATA] counts."""
    assert spec_n.shape == base_n.shape and spec_n.shape[1:] == (N_STRATA,), (
        spec_n.shape,
        base_n.shape,
    )
    eligible = min_bucket <= _LOAD_INDEX
    bounds: list[tuple[int, int]] = []
    acc_s = np.zeros(N_STRATA)
    acc_b = np.zeros(N_STRATA)
    start = 0
    for t in range(spec_n.shape[0]):
        acc_s += spec_n[t]
        acc_b += base_n[t]
        matched = eligible & (acc_s > 0) & (acc_b > 0)
        if acc_s[matched].sum() >= min_requests and acc_b[matched].sum() >= min_requests:
            bounds.append((start, t))
            acc_s[:] = 0.0
            acc_b[:] = 0.0
            start = t + 1
    return bounds


def _block_variances(blocks: NDArray[np.float64], fallback: float) -> NDArray[np.float64]:
    """Each block's pooled within-bucket log variance; `fallback` below _BLOCK_MIN_DOF.
    blocks: [B, N_STRATA, 3] -> [B]."""
    assert blocks.ndim == 3 and blocks.shape[1:] == (N_STRATA, 3), blocks.shape
    n, s1, s2 = blocks[:, :, 0], blocks[:, :, 1], blocks[:, :, 2]
    filled = n > 0
    within = np.where(filled, s2 - s1**2 / np.where(filled, n, 1.0), 0.0).sum(axis=1)
    dof = n.sum(axis=1) - filled.sum(axis=1)
    pooled = np.maximum(within / np.maximum(dof, 1.0), MIN_LOG_VARIANCE)
    return np.where(dof >= _BLOCK_MIN_DOF, pooled, fallback)


def error_blocks(
    spec: ArmPanel, baseline: ArmPanel, *, min_requests: int, first: int = 0
) -> list[BlockEstimate]:
    """Error-rate differences (spec - baseline) per block of >= min_requests requests per
    arm. The variance uses each arm's own rate over all slots read, smoothed as
    (errors + 1) / (requests + 2) so that error-free arms do not make it zero.

    NOTE: per arm, not pooled: at `full` the small holdout's rate is the noisy term, and a
    pooled rate dominated by the spec arm would misstate it.
    """
    assert spec.slots == baseline.slots and 0 <= first <= spec.slots, (
        spec.slots,
        baseline.slots,
        first,
    )
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
    # spec_counts, baseline_counts: [N_STRATA, buckets]
    assert spec_counts.shape == baseline_counts.shape and spec_counts.shape[0] == N_STRATA, (
        spec_counts.shape,
        baseline_counts.shape,
    )
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


PROJECTION_CEILING = 1000.0  # per-worker load: beyond it the next stage's queue diverges


@dataclass(frozen=True, slots=True)
class SpecFlow:
    """The spec pool's traffic this stage, to project its per-worker load at another share.

    Requests in flight per worker grow from rate_now * latency_now / workers to
    rate_next * latency(L) / workers (Little's law), where latency(L) = latency_now *
    exp(log_slope * (L - load_now)) is the spec arm's own fitted line (log latency against
    load; a negative slope counts as flat). Under the balancer the load at dispatch sits a
    near-constant offset below the mean in flight, so the increment, not the level,
    carries over. Reading latency at today's load (log_slope 0) under-projects a pair
    that slows with load: at 8 workers, 50 % -> full of the suite's load loser, 1.55
    against the 1.85 measured, where it no longer pays.
    """

    load_now: float
    share_now: float  # percent of the segment on the spec arm now
    segment_rate_per_s: float
    spec_latency_s: float  # mean end-to-end latency of the spec arm's requests now
    spec_workers: int
    log_slope: float = 0.0

    def _latency(self, load: float) -> float:
        rise = max(self.log_slope, 0.0) * max(load - self.load_now, 0.0)
        return self.spec_latency_s * math.exp(min(rise, 50.0))

    def _in_flight_now(self) -> float:
        return self.share_now / 100.0 * self.segment_rate_per_s * self.spec_latency_s

    def load_at(self, share_next: float) -> float:
        """The fixed point L of the growth above at `share_next` percent; a smaller share
        keeps today's load; a queue that diverges gives PROJECTION_CEILING."""
        if share_next <= self.share_now:
            return self.load_now
        workers = max(self.spec_workers, 1)
        rate_next = share_next / 100.0 * self.segment_rate_per_s
        load = self.load_now
        for _ in range(200):
            step = (
                self.load_now + (rate_next * self._latency(load) - self._in_flight_now()) / workers
            )
            if step >= PROJECTION_CEILING:
                return PROJECTION_CEILING
            if abs(step - load) < 1e-6:
                return step
            load = step
        return PROJECTION_CEILING  # still growing after 200 steps: no stable load

    def share_for(self, load: float) -> float | None:
        """The share whose projected load is `load`; None without traffic."""
        denominator = self.segment_rate_per_s * self._latency(load)
        if denominator <= 0:
            return None
        in_flight = max(self.spec_workers, 1) * (load - self.load_now) + self._in_flight_now()
        return 100.0 * in_flight / denominator
