"""Keep N workers of one pool serving: start, wait, restart with backoff, stop.

Each worker is one vLLM server on its own port (base_port + index). A worker
whose process exits is restarted after an exponentially growing delay
(`Backoff`); the delay resets once a restarted worker has served for
`healthy_reset_s`. Every transition is recorded as a `WorkerEvent` so that
operators (and tests) can see what happened and when.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.pools.launcher import ServerCommand
from engine.pools.server import VllmServer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Backoff:
    initial_s: float = 2.0
    factor: float = 2.0
    max_s: float = 60.0

    def delay(self, failures: int) -> float:
        """Delay before the restart that follows `failures` consecutive failures (>= 1)."""
        return min(self.initial_s * self.factor ** max(failures - 1, 0), self.max_s)


@dataclass(frozen=True)
class WorkerEvent:
    at: float  # time.monotonic()
    worker: int
    kind: str  # started, ready, exited, restart_scheduled, start_failed, stopped
    detail: str = ""


@dataclass
class Worker:
    index: int
    server: VllmServer
    failures: int = 0
    restart_at: float | None = None
    ready_at: float | None = None
    booting_since: float | None = None
    restarts: int = 0


@dataclass
class Supervisor:
    make_command: Callable[[int], ServerCommand]  # worker index -> its server command
    workers: int
    log_dir: Path | None = None
    backoff: Backoff = field(default_factory=Backoff)
    ready_timeout_s: float = 300.0
    poll_s: float = 0.5
    healthy_reset_s: float = 30.0
    on_event: Callable[[WorkerEvent], None] | None = None
    events: list[WorkerEvent] = field(default_factory=list)
    _workers: list[Worker] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _event(self, worker: int, kind: str, detail: str = "") -> None:
        event = WorkerEvent(time.monotonic(), worker, kind, detail)
        with self._lock:
            self.events.append(event)
        log.info("worker %d: %s %s", worker, kind, detail)
        if self.on_event is not None:
            self.on_event(event)

    def _new_server(self, index: int) -> VllmServer:
        command = self.make_command(index)
        log_path = self.log_dir / f"worker-{index}-{command.port}.log" if self.log_dir else None
        return VllmServer(command, log_path)

    @property
    def servers(self) -> list[VllmServer]:
        return [w.server for w in self._workers]

    def _launch(self, worker: Worker) -> None:
        worker.server.start()
        worker.booting_since = time.monotonic()
        worker.ready_at = None
        detail = f"pid={worker.server.pid} port={worker.server.port} restarts={worker.restarts}"
        self._event(worker.index, "started", detail)

    def start(self, wait: bool = True) -> None:
        """Start every worker (they boot concurrently); with `wait`, until each serves."""
        for index in range(self.workers):
            worker = Worker(index, self._new_server(index))
            self._workers.append(worker)
            self._launch(worker)
        while wait and not self._stop.is_set() and not self.all_ready():
            self.check_once()
            self._stop.wait(self.poll_s)

    def resize(self, workers: int) -> None:
        """Run `workers` workers from now on: start the missing ones (next indices, so
        next ports) or stop the highest-indexed ones. Call it from the thread that
        supervises (between `check_once` passes)."""
        assert workers >= 0
        while len(self._workers) < workers:
            index = len(self._workers)
            worker = Worker(index, self._new_server(index))
            self._workers.append(worker)
            self._launch(worker)
        while len(self._workers) > workers:
            worker = self._workers.pop()
            worker.server.stop()
            self._event(worker.index, "stopped", "scaled down")
        self.workers = workers

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait(self, seconds: float) -> None:
        """Sleep up to `seconds`, less if a stop is requested."""
        self._stop.wait(seconds)

    def all_ready(self) -> bool:
        return all(w.ready_at is not None for w in self._workers)

    def _fail(self, worker: Worker, kind: str, detail: str) -> None:
        worker.server.stop(grace=5.0)
        worker.failures += 1
        worker.ready_at = worker.booting_since = None
        delay = self.backoff.delay(worker.failures)
        worker.restart_at = time.monotonic() + delay
        self._event(worker.index, kind, detail)
        self._event(worker.index, "restart_scheduled", f"in {delay:.2f}s failure={worker.failures}")

    def _check_worker(self, worker: Worker, now: float) -> None:
        if worker.restart_at is not None:
            if now >= worker.restart_at:
                worker.restart_at = None
                worker.restarts += 1
                worker.server = self._new_server(worker.index)
                self._launch(worker)
            return
        if not worker.server.alive():
            code = worker.server.process.returncode if worker.server.process else None
            self._fail(worker, "exited", f"code={code}")
        elif worker.booting_since is not None:
            if worker.server.serving():
                worker.ready_at, worker.booting_since = now, None
                self._event(worker.index, "ready")
            elif now - worker.booting_since > self.ready_timeout_s:
                self._fail(worker, "start_failed", f"not serving after {self.ready_timeout_s}s")
        elif worker.failures and worker.ready_at and now - worker.ready_at >= self.healthy_reset_s:
            worker.failures = 0  # served long enough: the next crash starts the backoff over

    def check_once(self) -> None:
        """One non-blocking supervision pass over every worker."""
        for worker in self._workers:
            if self._stop.is_set():
                return
            self._check_worker(worker, time.monotonic())

    def run(self) -> None:
        """Supervise until `stop()` is called (from a signal handler or another thread)."""
        while not self._stop.is_set():
            self.check_once()
            self._stop.wait(self.poll_s)

    def request_stop(self) -> None:
        """Signal-safe: ends `run()`; the caller then calls `stop()`."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.server.stop()
            self._event(worker.index, "stopped")

    def events_of(self, worker: int, kind: str) -> list[WorkerEvent]:
        with self._lock:
            return [e for e in self.events if e.worker == worker and e.kind == kind]
