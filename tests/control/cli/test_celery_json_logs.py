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
        # SIGTERM stops beat in every phase of start-up (test_celery_beat_stop.py);
        # communicate() drains the pipe while it does.
        proc.send_signal(signal.SIGTERM)
        try:
            rest, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=30)
    assert proc.returncode == 0, lines
    lines += [line for line in rest.splitlines() if line.strip()]
    parsed = [json.loads(line) for line in lines]
    assert all({"ts", "level", "logger", "message"} <= set(p) for p in parsed)
    assert any(p["message"].startswith("beat: Starting") for p in parsed), parsed
