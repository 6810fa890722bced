"""`specroute worker` stops on SIGTERM soon after start-up: exit 0 within a bound,
no traceback, whether the signal lands as it reports ready or once it is idle.

(Before Celery installs its handlers, within the first second or two, SIGTERM
ends the process at once with Python's default action: nothing has started then.)"""

import os
from pathlib import Path

import pytest

from tests.control.cli.celery_process import celery_process, stop_after_start

# A warm shutdown takes 2-7 s on this machine (the embedded broker's poll); the bound
# leaves room for a loaded CI.
STOP_BOUND_S = 25.0


@pytest.mark.parametrize("delay_s", [0.0, 1.0])
def test_worker_stops_on_sigterm_after_it_is_ready(tmp_path: Path, delay_s: float) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECROUTE_")}
    env |= {"SPECROUTE_DATA_DIR": str(tmp_path)}
    with celery_process(env, tmp_path, command="worker") as proc:
        out, stopped_s = stop_after_start(proc, delay_s, STOP_BOUND_S, marker=" ready.")
    assert proc.returncode == 0, out
    assert stopped_s < STOP_BOUND_S
    assert "Traceback" not in out, out
