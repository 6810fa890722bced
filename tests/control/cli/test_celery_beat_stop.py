"""`specroute beat` stops on SIGTERM in every phase of start-up: exit 0 within a few
seconds, the schedule file closed with its entries, one scheduler created.

Celery's own handler re-creates the scheduler when the signal lands while it is
being created (see `control.automation.beat`); beat then either carried on or
exited through a traceback big enough to fill a pipe nobody read."""

import os
import shelve
import subprocess
import sys
from pathlib import Path

import pytest

from control.automation.celery_app import beat_schedule
from control.settings import ControlSettings
from tests.control.cli.celery_process import celery_process, stop_after_start
from tests.control.cli.sigterm_beat_app import CREATED

ROOT = Path(__file__).resolve().parents[3]
# Beat exits in about a second once signalled; the bound leaves room for a loaded CI.
STOP_BOUND_S = 10.0


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECROUTE_")}
    return env | {"SPECROUTE_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)}


def _stored_entries(data_dir: Path) -> set[str]:
    with shelve.open(str(data_dir / "celerybeat-schedule"), flag="r") as store:
        return set(store["entries"])


def _expected_entries(data_dir: Path) -> set[str]:
    names = set(beat_schedule(ControlSettings(data_dir=data_dir)))
    # Celery adds its result-backend cleanup (the database backend does not expire).
    return names | {"celery.backend_cleanup"}


@pytest.mark.parametrize("delay_s", [0.0, 0.03, 0.3, 1.5])
def test_beat_stops_on_sigterm_after_starting(tmp_path: Path, delay_s: float) -> None:
    with celery_process(_env(tmp_path), tmp_path) as proc:
        out, stopped_s = stop_after_start(proc, delay_s, STOP_BOUND_S)
    assert proc.returncode == 0, out
    assert stopped_s < STOP_BOUND_S
    assert "Traceback" not in out and "corrupted" not in out, out
    assert _stored_entries(tmp_path) == _expected_entries(tmp_path)


def test_beat_sigterm_while_scheduler_is_created(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "celery", "-A", "tests.control.cli.sigterm_beat_app"]
    done = subprocess.run(
        [*argv, "beat", "--loglevel=INFO"],
        env=_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    # Celery's own handler creates a second scheduler inside the handler (on the
    # schedule file the first holds open); this one lets the first finish.
    assert output.count(CREATED) == 1, output
    assert "beat: Shutting down" in output, output
    assert "Traceback" not in output and "corrupted" not in output, output
    assert _stored_entries(tmp_path) == _expected_entries(tmp_path)
