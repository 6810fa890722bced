"""Heartbeat agent on real vLLM servers, reporting to the real control app over HTTP.

- contents: a beat from the session's spec server equals what that server's own
  /metrics says, and the control plane stores it;
- cost: the CPU seconds of the server's process tree and the tokens its engine
  accepted and emitted, per beat, agree with the engine's own counters and the
  responses' usage, and control exports them for the cost-per-accepted-token rule;
- a hung server (SIGSTOP) and a killed one are reported unhealthy within two
  heartbeats, and the supervisor brings the killed one back after its backoff.
"""

import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest
import uvicorn
from prometheus_client.parser import text_string_to_metric_families

from engine.agent import ControlClient, HeartbeatAgent, WorkerProbe, parse_engine_metrics
from engine.agent.energy import EnergyMeter
from engine.agent.memory import process_tree, process_tree_cpu_seconds
from engine.pools.launcher import LaunchOptions, build_server_command
from engine.pools.local import tiny_baseline_pool
from engine.pools.supervisor import Backoff, Supervisor
from specwire import HeartbeatAck, WorkerHeartbeat
from tests.fixtures.vllm import RunningServer, free_port, require_tiny_pair

pytestmark = pytest.mark.vllm

ADMIN_TOKEN = "agent-test-admin"
INTERNAL_TOKEN = "agent-test-internal"


@dataclass
class ControlServer:
    base_url: str

    def admin(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10
        )

    def enrol(self, pool_id: int) -> str:
        """An agent token for `pool_id`, for loopback workers (as `admin pool enrol`)."""
        with self.admin() as http:
            response = http.post(
                f"/admin/v1/pools/{pool_id}/agent-tokens",
                json={
                    "name": f"agent-{pool_id}-{time.monotonic_ns()}",
                    "allowed_endpoints": ["http://127.0.0.1"],
                },
            )
            assert response.status_code == 201, response.text
            return str(response.json()["token"])

    def client(self, pool_id: int) -> ControlClient:
        return ControlClient(self.base_url, self.enrol(pool_id))

    def create_pool(self, name: str, target_ref: str) -> int:
        with self.admin() as http:
            body = {"name": name, "served_model_name": "tiny", "target_ref": target_ref}
            response = http.post("/admin/v1/pools", json=body)
            assert response.status_code in (200, 201), response.text
            return int(response.json()["id"])

    def workers(self, pool_id: int) -> dict[str, dict[str, object]]:
        with self.admin() as http:
            response = http.get(f"/admin/v1/pools/{pool_id}")
            assert response.status_code == 200, response.text
            return {w["id"]: w for w in response.json()["workers"]}


@pytest.fixture(scope="module")
def control_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlServer]:
    from control.app import create_app
    from control.migrate import upgrade
    from control.settings import ControlSettings

    data = tmp_path_factory.mktemp("control")
    url = f"sqlite:///{data / 'control.db'}"
    upgrade(url)
    settings = ControlSettings(
        data_dir=data, database_url=url, admin_token=ADMIN_TOKEN, internal_token=INTERNAL_TOKEN
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "control app did not start"
        time.sleep(0.05)
    yield ControlServer(f"http://127.0.0.1:{port}")
    server.should_exit = True
    thread.join(timeout=10)


def test_heartbeat_matches_the_servers_own_metrics_and_is_stored(
    vllm_spec_server: RunningServer,
    vllm_baseline_server: RunningServer,
    control_server: ControlServer,
) -> None:
    # Some speculative work first, so the counters are not all zero.
    response = httpx.post(
        f"{vllm_spec_server.base_url}/v1/completions",
        json={"model": "tiny", "prompt": "def add(a, b):\n", "max_tokens": 24, "temperature": 0},
        timeout=120,
    )
    assert response.status_code == 200
    pool_id = control_server.create_pool("agent-contents", vllm_spec_server.pool.target_ref)
    pid = vllm_spec_server.process.pid
    probe = WorkerProbe(pool_id, vllm_spec_server.base_url, speculative=True, pid=lambda: pid)
    with httpx.Client() as http:
        beat = probe.beat(http)
        own = parse_engine_metrics(httpx.get(f"{vllm_spec_server.base_url}/metrics").text)

    assert beat.healthy and beat.draft_loaded
    assert own.spec is not None and beat.spec == own.spec  # idle server: counters are stable
    assert beat.spec.num_drafts > 0 and beat.spec.num_draft_tokens == 3 * beat.spec.num_drafts
    assert len(beat.spec.accepted_per_position) == 3
    assert sum(beat.spec.accepted_per_position) == beat.spec.num_accepted_tokens
    assert (beat.running, beat.waiting, beat.kv_cache_usage) == (
        own.running,
        own.waiting,
        own.kv_cache_usage,
    )
    # The engine core is a child process: the tree's memory exceeds the API server's.
    api_rss = psutil.Process(pid).memory_info().rss
    assert beat.process_memory_bytes > api_rss > 50 * 2**20
    assert beat.gpu_memory_bytes is None  # no GPU on this machine
    assert beat.engine_version and beat.engine_version.startswith("0.")

    control = control_server.client(pool_id)
    ack = control.heartbeat("spec-worker-0", beat)
    assert ack.worker_id == "spec-worker-0" and ack.registered
    stored = control_server.workers(pool_id)["spec-worker-0"]
    assert (stored["healthy"], stored["draft_loaded"]) == (True, True)
    assert stored["endpoint_url"] == vllm_spec_server.base_url

    # A baseline server does not speculate: no counters, no draft.
    baseline_pid = vllm_baseline_server.process.pid
    baseline_probe = WorkerProbe(
        pool_id, vllm_baseline_server.base_url, speculative=False, pid=lambda: baseline_pid
    )
    with httpx.Client() as http:
        baseline_beat = baseline_probe.beat(http)
    assert baseline_beat.healthy and not baseline_beat.draft_loaded
    assert baseline_beat.spec is None
    control.close()


COST_PROMPTS = ["def add(a, b):\n", "for i in range(10):\n", "The quick brown fox", "import os\n"]


def test_cpu_seconds_per_accepted_token_agrees_with_the_engines_counters(
    vllm_spec_server: RunningServer, control_server: ControlServer
) -> None:
    pool_id = control_server.create_pool("agent-cost", vllm_spec_server.pool.target_ref)
    pid = vllm_spec_server.process.pid
    probe = WorkerProbe(pool_id, vllm_spec_server.base_url, speculative=True, pid=lambda: pid)
    max_tokens = 32
    with httpx.Client() as http:
        first = probe.beat(http)
        started = time.monotonic()
        completion_tokens = 0
        for prompt in COST_PROMPTS:
            response = http.post(
                f"{vllm_spec_server.base_url}/v1/completions",
                json={
                    "model": "tiny",
                    "prompt": prompt,
                    "max_tokens": max_tokens,
                    "temperature": 0,
                    "ignore_eos": True,
                },
                timeout=120,
            )
            assert response.status_code == 200, response.text
            completion_tokens += response.json()["usage"]["completion_tokens"]
        second = probe.beat(http)
        elapsed = time.monotonic() - started
        own = parse_engine_metrics(http.get(f"{vllm_spec_server.base_url}/metrics").text)
    tree_now = process_tree_cpu_seconds(pid)

    assert first.spec is not None and second.spec is not None and own.spec is not None
    assert first.cpu_seconds is not None and second.cpu_seconds is not None
    assert tree_now is not None and first.cpu_seconds < second.cpu_seconds <= tree_now
    # The whole tree, not the API server alone: the engine core does the work.
    api = psutil.Process(pid).cpu_times()
    assert second.cpu_seconds > api.user + api.system
    # CPU spent between the beats fits in the cores the tree may run on.
    cores = set().union(*(p.cpu_affinity() for p in process_tree(pid)))
    cpu = second.cpu_seconds - first.cpu_seconds
    assert 0 < cpu <= (elapsed + 1.0) * len(cores)
    # The token counters are the engine's own, and match what the responses got.
    assert second.spec == own.spec and second.generation_tokens == own.generation_tokens
    assert first.generation_tokens is not None and second.generation_tokens is not None
    generated = second.generation_tokens - first.generation_tokens
    assert generated == completion_tokens == len(COST_PROMPTS) * max_tokens
    accepted = second.spec.num_accepted_tokens - first.spec.num_accepted_tokens
    drafts = second.spec.num_drafts - first.spec.num_drafts
    assert 0 < accepted < generated
    # Each verification pass emits its accepted tokens plus one; the prefill emits one.
    assert generated <= accepted + drafts + len(COST_PROMPTS)
    cost = cpu / accepted
    print(f"cpu {cpu:.2f} s, accepted {accepted}, emitted {generated}: {cost:.4f} s/token")
    assert cost > 0

    # Engine telemetry (issue #25 item 4), from the same page. The requests ran one at a
    # time: each target pass of a sequence (a prefill or a verify step, emitting its
    # accepted draft tokens plus one) is an engine step, and the API server also counts
    # a few steps that emitted nothing (measured: 54 steps for 49 passes, 4 requests).
    t0, t1 = first.telemetry, second.telemetry
    assert t0 is not None and t1 is not None
    assert t1.engine_steps is not None and t0.engine_steps is not None
    assert t1.engine_steps == own.engine_steps
    steps = t1.engine_steps - t0.engine_steps
    assert generated - accepted <= steps <= generated - accepted + 2 * len(COST_PROMPTS)
    assert t1.decode_requests is not None and t0.decode_requests is not None
    assert t1.decode_requests - t0.decode_requests == len(COST_PROMPTS)
    assert t1.decode_seconds is not None and t0.decode_seconds is not None
    decode = t1.decode_seconds - t0.decode_seconds
    assert 0 < decode <= elapsed
    print(f"{steps} steps, {drafts} verify steps: {decode / drafts * 1000:.1f} ms per step")
    assert t1.kv_blocks_total is not None and t1.kv_blocks_total > 0
    assert t1.kv_block_size is not None and t1.kv_block_size >= 16
    assert t1.kv_blocks_used == 0 and second.running == 0  # idle between the requests
    # No powercap and no pynvml on this machine: absent, with the reason.
    expected = EnergyMeter().read()
    assert (t1.energy_joules is None) == (expected.joules is None)
    if expected.joules is None:
        assert t1.energy_source == expected.source and t1.energy_source.startswith("absent: ")

    # Control exports the counters the recording rule divides, as the beat carried them.
    control = control_server.client(pool_id)
    control.heartbeat("cost-worker-0", second)
    control.close()
    exposed = {
        (s.name, s.labels["worker"]): s.value
        for family in text_string_to_metric_families(
            httpx.get(f"{control_server.base_url}/metrics").text
        )
        for s in family.samples
        if s.name.startswith("specroute_control_worker_")
    }
    assert exposed[("specroute_control_worker_cpu_seconds_total", "cost-worker-0")] == (
        second.cpu_seconds
    )
    assert exposed[("specroute_control_worker_accepted_tokens_total", "cost-worker-0")] == (
        second.spec.num_accepted_tokens
    )
    assert exposed[("specroute_control_worker_generation_tokens_total", "cost-worker-0")] == (
        second.generation_tokens
    )
    assert exposed[("specroute_control_worker_engine_steps_total", "cost-worker-0")] == (
        t1.engine_steps
    )
    assert exposed[("specroute_control_worker_decode_seconds_total", "cost-worker-0")] == (
        t1.decode_seconds
    )
    assert exposed[("specroute_control_worker_kv_blocks", "cost-worker-0")] in (
        0.0,
        float(t1.kv_blocks_total),
    )
    assert exposed[("specroute_control_worker_energy_source_info", "cost-worker-0")] == 1.0


@dataclass
class Beats:
    items: list[tuple[float, WorkerHeartbeat, HeartbeatAck | None]]

    def record(self, beat: WorkerHeartbeat, ack: HeartbeatAck | None) -> None:
        self.items.append((time.monotonic(), beat, ack))

    def after(self, t: float) -> list[WorkerHeartbeat]:
        return [b for at, b, _ in list(self.items) if at > t]


def wait_for(predicate, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_hung_and_dead_server_flip_unhealthy_within_two_beats_then_recover(
    control_server: ControlServer, vllm_log_dir: Path
) -> None:
    root = require_tiny_pair()
    pool = tiny_baseline_pool(root)
    pool_id = control_server.create_pool("agent-faults", pool.target_ref)
    port = free_port()
    cores = sorted(os.sched_getaffinity(0))
    options = LaunchOptions(cpu_cores=str(cores[-1]) if len(cores) > 1 else None)
    supervisor = Supervisor(
        lambda _i: build_server_command(pool, port, options),
        workers=1,
        log_dir=vllm_log_dir / "agent-faults",
        backoff=Backoff(initial_s=1.0),
        poll_s=0.2,
    )
    interval = 1.0
    beats = Beats([])
    control = control_server.client(pool_id)
    probe = WorkerProbe(
        pool_id,
        f"http://127.0.0.1:{port}",
        speculative=False,
        pid=lambda: supervisor.servers[0].pid,
        health_timeout=0.5,
    )
    agent = HeartbeatAgent("faulty-0", probe, control, interval, on_beat=beats.record)
    supervisor.start()  # waits until it serves
    runner = threading.Thread(target=supervisor.run, daemon=True)
    runner.start()
    agent.start()
    try:
        wait_for(lambda: any(b.healthy for b in beats.after(0)), 10, "a healthy beat")
        assert control_server.workers(pool_id)["faulty-0"]["healthy"] is True

        # Hung: the API server stops answering but its process exists.
        api_pid = supervisor.servers[0].pid
        assert api_pid is not None
        os.kill(api_pid, signal.SIGSTOP)
        hung_at = time.monotonic()
        try:
            wait_for(lambda: len(beats.after(hung_at)) >= 2, 10 * interval, "two beats")
            assert not all(b.healthy for b in beats.after(hung_at)[:2])
            assert control_server.workers(pool_id)["faulty-0"]["healthy"] is False
        finally:
            os.kill(api_pid, signal.SIGCONT)
        resumed_at = time.monotonic()
        wait_for(lambda: any(b.healthy for b in beats.after(resumed_at)), 15, "recovery")

        # Dead: killed; reported within two beats, restarted after the backoff.
        supervisor.servers[0].kill()
        killed_at = time.monotonic()
        wait_for(lambda: len(beats.after(killed_at)) >= 2, 10 * interval, "two beats")
        assert not all(b.healthy for b in beats.after(killed_at)[:2])
        assert control_server.workers(pool_id)["faulty-0"]["healthy"] is False
        wait_for(lambda: supervisor.events_of(0, "restart_scheduled"), 10, "a scheduled restart")
        wait_for(lambda: len(supervisor.events_of(0, "ready")) >= 2, 300, "the restart to serve")
        (exited,) = supervisor.events_of(0, "exited")
        restarted = supervisor.events_of(0, "started")[-1]
        assert restarted.at - exited.at >= 1.0  # the backoff was respected
        assert supervisor.servers[0].pid != api_pid
        back_at = time.monotonic()
        wait_for(lambda: any(b.healthy for b in beats.after(back_at)), 15, "healthy again")
        assert control_server.workers(pool_id)["faulty-0"]["healthy"] is True
    finally:
        agent.stop()
        supervisor.stop()
        runner.join(timeout=10)
        control.close()


def test_engine_up_serves_heartbeats_and_stops_cleanly_on_sigterm(
    control_server: ControlServer, tmp_path: Path
) -> None:
    """`specroute engine up` end to end: spec from control, a worker, heartbeats, SIGTERM."""
    import subprocess
    import sys

    root = require_tiny_pair()
    with control_server.admin() as http:
        body = {
            "name": "cli-baseline",
            "served_model_name": "tiny",
            "target_ref": str(root / "target"),
            "engine_args": {"max-model-len": 512, "max-num-seqs": 8},
        }
        response = http.post("/admin/v1/pools", json=body)
        assert response.status_code in (200, 201), response.text
        pool_id = int(response.json()["id"])
    port = free_port()
    specroute = str(Path(sys.executable).parent / "specroute")
    argv = [specroute, "engine", "up", "--pool", "cli-baseline"]
    argv += ["--control-url", control_server.base_url]
    argv += ["--agent-token", control_server.enrol(pool_id)]
    argv += ["--workers", "1", "--base-port", str(port), "--heartbeat", "1"]
    argv += ["--log-dir", str(tmp_path / "logs")]
    out = (tmp_path / "engine-up.log").open("wb")
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    tree: list[psutil.Process] = []
    try:
        wait_for(
            lambda: any(w["healthy"] for w in control_server.workers(pool_id).values()),
            540,
            "a healthy worker in control",
        )
        (worker,) = control_server.workers(pool_id).values()
        assert worker["endpoint_url"] == f"http://127.0.0.1:{port}"
        completion = httpx.post(
            f"http://127.0.0.1:{port}/v1/completions",
            json={"model": "tiny", "prompt": "x = ", "max_tokens": 4, "temperature": 0},
            timeout=120,
        )
        assert completion.status_code == 200
        tree = psutil.Process(proc.pid).children(recursive=True)
        assert len(tree) >= 2  # the API server and its engine core at least
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        out.close()
    log = (tmp_path / "engine-up.log").read_text()
    assert "worker 0: ready" in log and "stopped" in log
    assert not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
