"""The error-rate monitor's blocks and the spec pool's load projection.

Error blocks: consecutive time slots are gathered until both arms hold at least
`min_requests` requests, and each block carries the difference of the arms'
error rates (spec - baseline) with its sampling variance, so every block
estimate is a mean of enough requests to be close to Gaussian (tiny traffic
simply makes longer blocks). The latency monitor's blocks compare the arms
along their lines over load (`load_model.py`).

`SpecFlow` projects the spec pool's per-worker load at the next stage's share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from control.stats.panel import ArmPanel
from control.stats.sequential import BlockEstimate


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
