"""bench.gateway_overhead stopped by SIGTERM stops every process it started."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]


def test_sigterm_stops_the_bench_and_every_process_it_started(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bench.gateway_overhead", "--no-nginx"]
    cmd += ["--concurrency", "1", "--requests", "100000", "--tokens", "4", "--interval-ms", "1"]
    # NOTE: stderr to a file, not a pipe: the children inherit it, and a pipe nobody
    # reads until the end fills and blocks them.
    log = tmp_path / "stderr.log"
    with log.open("wb") as err:
        bench = subprocess.Popen(
            cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=err
        )
    parent = psutil.Process(bench.pid)
    children: list[psutil.Process] = []
    try:
        # Running: the fake engine and the gateway are up and requests are flowing.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and bench.poll() is None:
            children = parent.children(recursive=True)
            names = " ".join(" ".join(c.cmdline()) for c in children)
            if "engine.fake" in names and "gateway" in names and len(children) >= 2:
                break
            time.sleep(0.2)
        assert bench.poll() is None, log.read_text()
        assert len(children) >= 2, [c.cmdline() for c in children]
        time.sleep(2.0)  # into the measuring loop
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(timeout=60) == 130, log.read_text()
        assert "interrupted: stopping every process the run started" in log.read_text()
        gone, alive = psutil.wait_procs(children, timeout=10)
        assert alive == [], [c.cmdline() for c in alive]
        assert len(gone) == len(children)
    finally:
        if bench.poll() is None:
            bench.kill()
        for child in children:
            if child.is_running():
                child.kill()
