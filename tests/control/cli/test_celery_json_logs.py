"""`specroute beat` with SPECROUTE_LOG_FORMAT=json writes only JSON lines (Celery's
own start-up lines included). Beat is used because it starts in about a second on
the embedded SQLite broker and logs at once; the worker takes the same path
(`control.cli.celery._app`)."""

import json
import os
from pathlib import Path

from tests.control.cli.celery_process import celery_process, read_until_started, terminate


def test_beat_logs_json_lines(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECROUTE_")}
    env |= {"SPECROUTE_LOG_FORMAT": "json", "SPECROUTE_DATA_DIR": str(tmp_path)}
    with celery_process(env, tmp_path) as proc:
        lines = read_until_started(proc)
        # SIGTERM stops beat in every phase of start-up (test_celery_beat_stop.py).
        rest = terminate(proc, 30)
    assert proc.returncode == 0, lines
    lines += [line for line in rest.splitlines() if line.strip()]
    parsed = [json.loads(line) for line in lines]
    assert all({"ts", "level", "logger", "message"} <= set(p) for p in parsed)
    assert any(p["message"].startswith("beat: Starting") for p in parsed), parsed
