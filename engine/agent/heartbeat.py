"""Probe one vLLM server and heartbeat what was seen to the control plane.

Unhealthy is decided by the probe itself, not by silence: a dead server
(connection refused, process gone) or a hung one (/health slower than
`health_timeout`) is reported `healthy=False` on the very next beat, so the
control plane sees it within two heartbeat intervals at worst.
"""

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from engine.agent.build import engine_build
from engine.agent.client import ControlClient, ControlClientError
from engine.agent.energy import EnergyMeter
from engine.agent.memory import (
    gpu_memory_bytes,
    process_tree,
    process_tree_cpu_seconds,
    process_tree_rss,
)
from engine.agent.metrics import EngineMetrics, parse_engine_metrics
from specwire import EngineTelemetry, HeartbeatAck, WorkerHeartbeat

log = logging.getLogger(__name__)


@dataclass
class WorkerProbe:
    """What the agent knows about the server it sits beside."""

    pool_id: int
    endpoint_url: str
    speculative: bool
    pid: Callable[[], int | None] = lambda: None  # the server's current pid (it may restart)
    health_timeout: float = 2.0
    # Weights digest of the target the server loads (specwire.artifacts), read once at start.
    model_digest: str | None = None
    # The host's energy counter (RAPL / NVML), or why it is absent.
    energy: EnergyMeter = field(default_factory=EnergyMeter)
    # The specroute build around the server (engine.agent.build.specroute_build).
    build: str | None = None
    # (server pid, most CPU seconds reported for it): the CPU counter never goes back
    # while the server lives (a child caught exiting drops out of one reading).
    _cpu_high: tuple[int, float] | None = field(default=None, init=False, repr=False)

    def _cpu_seconds(self, pid: int | None) -> float | None:
        used = process_tree_cpu_seconds(pid) if pid is not None else None
        if pid is None or used is None:
            return None
        if self._cpu_high is not None and self._cpu_high[0] == pid:
            used = max(used, self._cpu_high[1])
        self._cpu_high = (pid, used)
        return used

    def _telemetry(self, metrics: EngineMetrics | None) -> EngineTelemetry:
        energy = self.energy.read()
        if metrics is None:
            return EngineTelemetry(energy_joules=energy.joules, energy_source=energy.source)
        return EngineTelemetry(
            engine_steps=metrics.engine_steps,
            decode_seconds=metrics.decode_seconds,
            decode_requests=metrics.decode_requests,
            kv_blocks_total=metrics.kv_blocks_total,
            kv_blocks_used=metrics.kv_blocks_used,
            kv_block_size=metrics.kv_block_size,
            energy_joules=energy.joules,
            energy_source=energy.source,
        )

    def _get(self, http: httpx.Client, path: str) -> httpx.Response:
        return http.get(f"{self.endpoint_url}{path}", timeout=self.health_timeout)

    def beat(self, http: httpx.Client) -> WorkerHeartbeat:
        pid = self.pid()
        pids = {p.pid for p in process_tree(pid)} if pid is not None else set()
        healthy = False
        metrics: EngineMetrics | None = None
        version: str | None = None
        try:
            healthy = self._get(http, "/health").status_code == 200
            if healthy:
                metrics = parse_engine_metrics(self._get(http, "/metrics").text)
                version = self._get(http, "/version").json().get("version")
        except (httpx.HTTPError, ValueError) as exc:
            log.info("probe of %s failed: %s", self.endpoint_url, exc)
            healthy = False
        if pid is not None and not pids:
            healthy = False  # the process is gone even if something answers on the port
        # NOTE: a spec server that lost its draft still serves, but without the spec
        # counters it is not speculating; the control plane routes on draft_loaded.
        draft_loaded = bool(healthy and self.speculative and metrics and metrics.speculating)
        return WorkerHeartbeat(
            pool_id=self.pool_id,
            endpoint_url=self.endpoint_url,
            healthy=healthy and metrics is not None,
            draft_loaded=draft_loaded,
            kv_cache_usage=metrics.kv_cache_usage if metrics else 0.0,
            running=metrics.running if metrics else 0,
            waiting=metrics.waiting if metrics else 0,
            spec=metrics.spec if metrics else None,
            process_memory_bytes=process_tree_rss(pid) if pid is not None else 0,
            cpu_seconds=self._cpu_seconds(pid),
            generation_tokens=metrics.generation_tokens if metrics else None,
            gpu_memory_bytes=gpu_memory_bytes(pids),
            telemetry=self._telemetry(metrics),
            engine_version=version,
            engine_build=engine_build(version, self.build),
            model_digest=self.model_digest,
            sent_at=datetime.now(UTC),
        )


class HeartbeatAgent:
    """Runs `probe.beat()` every `interval` seconds and posts it to control."""

    def __init__(
        self,
        worker_id: str,
        probe: WorkerProbe,
        control: ControlClient,
        interval: float = 5.0,
        on_beat: Callable[[WorkerHeartbeat, HeartbeatAck | None], None] | None = None,
    ) -> None:
        assert probe.health_timeout < interval, "a probe must finish within one interval"
        self.worker_id = worker_id
        self.probe = probe
        self.control = control
        self.interval = interval
        self.on_beat = on_beat
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._http = httpx.Client()

    def beat_once(self) -> tuple[WorkerHeartbeat, HeartbeatAck | None]:
        beat = self.probe.beat(self._http)
        ack: HeartbeatAck | None = None
        try:
            ack = self.control.heartbeat(self.worker_id, beat)
        except ControlClientError as exc:
            # NOTE: keep beating; the control plane marks us stale if this persists.
            log.warning("heartbeat of %s not accepted: %s", self.worker_id, exc)
        if self.on_beat is not None:
            self.on_beat(beat, ack)
        return beat, ack

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat_once()
            except Exception:  # a probe defect must not kill the agent
                log.exception("heartbeat of %s failed", self.worker_id)
            self._stop.wait(self.interval)

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"heartbeat-{self.worker_id}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + self.probe.health_timeout * 3)
        self._http.close()
