"""`specroute beat` with SPECROUTE_LOG_FORMAT=json writes only JSON lines (Celery's
own start-up lines included). Beat is used because it starts in about a second on
the embedded SQLite broker and logs at once; the worker takes the same path
(`control.cli.celery._app`)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SPECROUTE = str(Path(sys.executable).parent / "specroute")


def test_beat_logs_json_lines(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECROUTE_")}
    env |= {"SPECROUTE_LOG_FORMAT": "json", "SPECROUTE_DATA_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [SPECROUTE, "beat"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60.0
        while not any("beat: Starting" in line for line in lines):
            assert time.monotonic() < deadline, lines
            line = proc.stdout.readline()
            if not line:
                assert proc.poll() is None, lines
                continue
            if line.strip():
                lines.append(line)
    finally:
        # NOTE: what is tested is the log format. A beat sent SIGTERM while it is still
        # creating its scheduler can take longer than 30 s to exit on a loaded machine
        # (a clean-clone CI saw it), so it is killed then rather than failing here.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    parsed = [json.loads(line) for line in lines]
    assert all({"ts", "level", "logger", "message"} <= set(p) for p in parsed)
    assert any(p["message"].startswith("beat: Starting") for p in parsed), parsed
