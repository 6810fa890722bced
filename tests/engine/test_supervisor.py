"""Supervisor: workers on distinct ports, restarts with exponential backoff, clean stop.

Runs real processes and real HTTP (a small crashing server stands in for vLLM so
that several crash/restart cycles take seconds); the vLLM restart is covered in
test_agent.py.
"""

import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from engine.pools.launcher import ServerCommand
from engine.pools.supervisor import Backoff, Supervisor
from tests.fixtures.vllm import free_port

STUB = str(Path(__file__).with_name("crashing_server.py"))


def stub_commands(tmp_path: Path, ports: list[int], crashes: dict[int, int]):  # type: ignore[no-untyped-def]
    def make(index: int) -> ServerCommand:
        argv = [sys.executable, STUB, "--port", str(ports[index])]
        argv += [
            "--state",
            str(tmp_path / f"launches-{index}"),
            "--crashes",
            str(crashes.get(index, 0)),
        ]
        return ServerCommand(argv, {}, ports[index], "127.0.0.1", "tiny", speculative=False)

    return make


def run_until(supervisor: Supervisor, done, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out; events: {supervisor.events}"
        supervisor.check_once()
        time.sleep(0.02)


def test_restarts_with_exponential_backoff_then_stays_up(tmp_path: Path) -> None:
    ports = [free_port(), free_port()]
    backoff = Backoff(initial_s=0.4, factor=2.0, max_s=5.0)
    supervisor = Supervisor(
        stub_commands(tmp_path, ports, crashes={0: 3}),
        workers=2,
        backoff=backoff,
        poll_s=0.02,
        healthy_reset_s=60.0,
    )
    supervisor.start()
    try:
        # worker 0 crashes on its first 3 launches, worker 1 never does
        def fourth_launch_ready() -> bool:
            starts = supervisor.events_of(0, "started")
            readies = supervisor.events_of(0, "ready")
            return len(starts) == 4 and bool(readies) and readies[-1].at > starts[-1].at

        run_until(supervisor, fourth_launch_ready, timeout=60)
        exits = supervisor.events_of(0, "exited")
        starts = supervisor.events_of(0, "started")
        assert len(exits) == 3 and len(starts) == 4
        gaps = [start.at - exit.at for exit, start in zip(exits, starts[1:], strict=True)]
        expected = [backoff.delay(n) for n in (1, 2, 3)]  # 0.4, 0.8, 1.6 s
        for gap, want in zip(gaps, expected, strict=True):
            assert want <= gap < want + 0.5, (gaps, expected)
        assert gaps[0] < gaps[1] < gaps[2]
        # every worker on its own port, all serving now
        for port in ports:
            assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
        assert supervisor.events_of(1, "exited") == []
        assert (tmp_path / "launches-0").read_text() == "4"
    finally:
        pids = [s.pid for s in supervisor.servers]
        supervisor.stop()
    assert all(
        not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
        for pid in pids
        if pid
    )
    for port in ports:
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)


def test_backoff_is_capped() -> None:
    backoff = Backoff(initial_s=1.0, factor=3.0, max_s=10.0)
    assert [backoff.delay(n) for n in range(1, 6)] == [1.0, 3.0, 9.0, 10.0, 10.0]


def test_failures_reset_after_serving_long_enough(tmp_path: Path) -> None:
    ports = [free_port()]
    supervisor = Supervisor(
        stub_commands(tmp_path, ports, crashes={0: 1}),
        workers=1,
        backoff=Backoff(initial_s=0.2),
        poll_s=0.02,
        healthy_reset_s=0.5,
    )
    supervisor.start()
    try:
        run_until(supervisor, lambda: len(supervisor.events_of(0, "started")) == 2, timeout=20)
        run_until(supervisor, lambda: supervisor._workers[0].ready_at is not None, timeout=20)
        worker = supervisor._workers[0]
        assert worker.failures == 1
        run_until(supervisor, lambda: worker.failures == 0, timeout=5)
    finally:
        supervisor.stop()
