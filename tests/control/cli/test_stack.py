"""`specroute stack status|down` on a real `specroute control serve` started as a
user starts it (the console script, its own process, another "terminal")."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from control.cli.pidfiles import entries, service_of
from tests.fixtures.ready import wait_ready

SPECROUTE = str(Path(sys.executable).with_name("specroute"))
ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(run_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECROUTE_")}
    return env | {"PYTHONPATH": str(ROOT), "SPECROUTE_RUN_DIR": str(run_dir)}


def stack(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SPECROUTE, "stack", *args],
        env=_env(run_dir),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["control", "serve", "--port", "8000"], "control"),
        (["gateway", "serve"], "gateway"),
        (["engine", "up", "--pool", "tiny-spec"], "engine"),
        (["worker", "--concurrency", "2"], "worker"),
        (["beat"], "beat"),
        (["admin", "status"], None),
        (["control", "migrate"], None),
    ],
)
def test_which_commands_get_a_pid_file(argv: list[str], name: str | None) -> None:
    assert service_of(argv) == name


def test_stack_down_stops_what_another_terminal_started(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    port = _free_port()
    server = subprocess.Popen(
        [SPECROUTE, "control", "serve", "--dev", "--port", str(port)],
        cwd=tmp_path,
        env=_env(run_dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # like a process of another terminal
    )
    try:
        url = f"http://127.0.0.1:{port}/healthz"
        wait_ready(url, time.monotonic() + 120, proc=server, what="control serve", interval=0.2)
        [entry] = entries(run_dir)
        assert (entry.name, entry.pid) == ("control", server.pid) and entry.running()
        # A stale file (its process gone) and a recycled pid (this test's own process
        # under another command line): neither may be signalled.
        stale = {"name": "worker", "pid": 2**22 + 1, "cmdline": ["x"], "started": 0.0}
        (run_dir / "worker-stale.json").write_text(json.dumps(stale))
        me = psutil.Process()
        recycled = {"name": "beat", "pid": me.pid, "cmdline": ["specroute", "beat"]}
        (run_dir / "beat-recycled.json").write_text(
            json.dumps(recycled | {"started": me.create_time()})
        )

        listed = stack(run_dir, "status")
        assert listed.returncode == 0, listed.stderr
        assert f"running control (pid {server.pid}): specroute control serve --dev" in listed.stdout
        assert listed.stdout.count("stale") == 2

        stopped = stack(run_dir, "down", "--timeout", "30")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        lines = stopped.stdout.splitlines()
        assert lines[-1].startswith(f"stopped: control (pid {server.pid})"), lines
        assert sum("stale pid file removed" in line for line in lines) == 2
        assert server.wait(timeout=10) is not None
        assert list(run_dir.glob("*.json")) == []
        assert stack(run_dir, "down").stdout.startswith("nothing to stop")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
