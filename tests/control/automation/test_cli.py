"""`specroute worker` is a real Celery worker: a subprocess on the embedded broker."""

import os
import signal
import subprocess
import sys
from pathlib import Path

from control.automation.app import create_celery_app
from control.automation.tasks import task_name
from control.migrate import upgrade
from control.settings import ControlSettings
from tests.control.automation.scenario import TASK_TIMEOUT_S


def test_specroute_worker_runs_the_sweeps(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'control.db'}"
    upgrade(db_url)
    env = os.environ | {"SPECROUTE_DATA_DIR": str(tmp_path), "SPECROUTE_DATABASE_URL": db_url}
    worker = subprocess.Popen(
        [str(Path(sys.executable).parent / "specroute"), "worker", "--pool", "solo"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        app = create_celery_app(ControlSettings(data_dir=tmp_path, database_url=db_url))
        result = app.send_task(task_name("run_guards"))
        # No rollouts yet: the sweep runs against the migrated database and finds none.
        assert result.get(timeout=TASK_TIMEOUT_S) == []
        assert result.status == "SUCCESS"
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
