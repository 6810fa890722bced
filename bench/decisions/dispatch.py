"""Balancer dispatch: every simulated request goes through the gateway's own balancer.

A continuous-time discrete-event simulation per run. Requests arrive as a Poisson
process; each is sent through a real `gateway.routing.balancer.Balancer` (one per
pool, over a `PoolSnapshot` of N healthy workers, the call the gateway makes:
`acquire(pool, exclude=set())`); its load at dispatch is the lease's
`load_at_dispatch`, its service time is drawn at that load from its arm's model, and
its lease is released when it completes. Requests stay in flight across window
boundaries and count in the window they end in, as the gateway's aggregator files a
request by `finished_at`.

Random numbers are drawn per window, vectorised (`traffic.draw_requests`); the loop
does only the dispatch and the completion heap.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from numpy.typing import NDArray

from control.simulation.traffic import (
    ArmModel,
    ArmRequests,
    Draws,
    TrafficModel,
    at_load,
    concat,
    draw_requests,
    take,
)
from gateway.routing.balancer import Balancer, Lease
from specwire import PoolSnapshot, WorkerSpec


class Dispatch(StrEnum):
    BALANCER = "balancer"  # through gateway.routing.balancer, in continuous time
    RANDOM = "random"  # each request's load drawn as Poisson(per-worker concurrency)


# The gateway's defaults: the simulation records no failures, so breakers stay closed.
BREAKER_THRESHOLD = 5
BREAKER_COOLDOWN_S = 30.0


@dataclass(frozen=True)
class Group:
    """Requests of one window that share an arm model and a pool."""

    key: str  # what the window builder files them under, e.g. "spec", "baseline"
    pool: str  # which pool's balancer serves them
    model: ArmModel
    n: int


@dataclass
class _Batch:
    key: str
    pool: str
    model: ArmModel
    draws: Draws
    loads: list[int]
    pending: int
    requests: ArmRequests | None = None
    ended: list[int] = field(default_factory=list)  # indices that ended this window


class BalancedPools:
    """The pools of one run and the requests in flight on them."""

    def __init__(self, traffic: TrafficModel, pools: dict[str, int], tag: str) -> None:
        """`pools`: pool name -> its number of workers."""
        self.traffic = traffic
        self.snapshots: dict[str, PoolSnapshot] = {}
        self.balancers: dict[str, Balancer] = {}
        for i, (name, workers) in enumerate(pools.items()):
            assert workers >= 1, f"pool {name} needs a worker"
            self.snapshots[name] = PoolSnapshot(
                id=i + 1,
                name=f"{name}-{tag}",
                served_model_name="sim",
                target_ref="sim-target",
                workers=[
                    WorkerSpec(
                        id=f"{name}-{tag}-{w}",
                        pool_id=i + 1,
                        endpoint_url=f"http://127.0.0.1:9/{tag}/{name}/{w}",
                        healthy=True,
                    )
                    for w in range(workers)
                ],
            )
            self.balancers[name] = Balancer(
                breaker_threshold=BREAKER_THRESHOLD, breaker_cooldown_s=BREAKER_COOLDOWN_S
            )
        # (completion second, sequence, lease, batch id, index in the batch)
        self._heap: list[tuple[float, int, Lease, int, int]] = []
        self._batches: dict[int, _Batch] = {}
        self._seq = 0
        self._next_batch = 0
        self._exclude: set[str] = set()
        # Loads at dispatch of the last window's arrivals, by key (ended or not).
        self.arrived: dict[str, NDArray[np.int64]] = {}

    def outstanding(self, pool: str) -> list[int]:
        """Requests in flight on each worker of `pool`, as its balancer counts them."""
        balancer = self.balancers[pool]
        return [balancer.outstanding(w.id) for w in self.snapshots[pool].workers]

    def window(
        self, rng: np.random.Generator, start_s: float, end_s: float, groups: list[Group]
    ) -> dict[str, ArmRequests]:
        """Dispatch the groups' requests, arriving uniformly in [start_s, end_s) (a
        Poisson process given their count), and return, by key, every request that
        ended in that interval (arrived now or earlier)."""
        assert end_s > start_s
        new: list[int] = []
        for g in groups:
            if g.n <= 0:
                continue
            bid = self._next_batch
            self._next_batch += 1
            draws = draw_requests(rng, g.model, self.traffic, g.n)
            self._batches[bid] = _Batch(g.key, g.pool, g.model, draws, [0] * g.n, g.n)
            new.append(bid)
        labels = np.repeat(
            np.asarray(new, np.int64), [self._batches[b].draws.n for b in new]
        )  # [total]
        rng.shuffle(labels)
        times = np.sort(rng.uniform(start_s, end_s, labels.shape[0]))  # [total]
        position = np.zeros(labels.shape[0], np.int64)  # index of each arrival in its batch
        for bid in new:
            at = np.flatnonzero(labels == bid)
            position[at] = np.arange(at.shape[0])
        self._dispatch(times, labels, position, new)
        self._complete_until(end_s, inclusive=False)
        self.arrived = {}
        for bid in new:
            b = self._batches[bid]
            b.requests = at_load(b.model, self.traffic, b.draws, np.asarray(b.loads, np.int64))
            self.arrived[b.key] = b.requests.gateway_load
        return self._collect()

    def _dispatch(
        self,
        times: NDArray[np.float64],
        labels: NDArray[np.int64],
        position: NDArray[np.int64],
        new: list[int],
    ) -> None:
        # NOTE: plain lists in the loop: indexing numpy arrays one scalar at a time
        # costs more than the balancer itself.
        base = {b: (self._batches[b].draws.e2e_base_ms / 1000.0).tolist() for b in new}
        slope = {b: (self._batches[b].draws.e2e_slope_ms / 1000.0).tolist() for b in new}
        pool_of = {b: self._batches[b].pool for b in new}
        loads = {b: self._batches[b].loads for b in new}
        acquire = {b: self.balancers[pool_of[b]].acquire for b in new}
        snapshot = {b: self.snapshots[pool_of[b]] for b in new}
        heap, exclude, seq, push = self._heap, self._exclude, self._seq, heapq.heappush
        for t, bid, j in zip(times.tolist(), labels.tolist(), position.tolist(), strict=True):
            if heap and heap[0][0] <= t:
                self._complete_until(t, inclusive=True)
            lease = acquire[bid](snapshot[bid], exclude)
            assert lease is not None, "every worker of a simulated pool is healthy"
            load = lease.load_at_dispatch
            loads[bid][j] = load
            seq += 1
            push(heap, (t + base[bid][j] + slope[bid][j] * load, seq, lease, bid, j))
        self._seq = seq

    def _complete_until(self, t: float, *, inclusive: bool) -> None:
        heap = self._heap
        while heap and (heap[0][0] <= t if inclusive else heap[0][0] < t):
            _, _, lease, bid, j = heapq.heappop(heap)
            lease.release()
            batch = self._batches[bid]
            batch.ended.append(j)
            batch.pending -= 1

    def _collect(self) -> dict[str, ArmRequests]:
        parts: dict[str, list[ArmRequests]] = {}
        for bid in list(self._batches):
            b = self._batches[bid]
            if b.ended:
                assert b.requests is not None
                parts.setdefault(b.key, []).append(
                    take(b.requests, np.asarray(sorted(b.ended), np.int64))
                )
                b.ended = []
            if b.pending == 0:
                del self._batches[bid]
        return {key: concat(p) for key, p in parts.items()}
