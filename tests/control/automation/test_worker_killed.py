"""A Celery worker killed after a flip committed but before its task was acknowledged:
the broker delivers the task again, the second run finds the decision its task id
already stored, and nothing flips twice; decisions and audit agree."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

from control.automation.app import create_celery_app
from control.automation.tasks import task_name
from control.db import Database
from control.settings import ControlSettings
from tests.control.automation import scenario as sc
from tests.fixtures.services import require_redis

ROOT = Path(__file__).resolve().parents[3]


def _worker(env: dict[str, str], log: Path) -> "subprocess.Popen[bytes]":
    argv = [sys.executable, "-m", "celery", "-A", "tests.control.automation.killed_worker_app"]
    argv += [
        "worker",
        "--pool=solo",
        "--loglevel=INFO",
        f"--hostname=killed-{uuid.uuid4().hex[:6]}",
    ]
    return subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT
    )


def test_a_worker_killed_before_the_ack_changes_nothing_on_redelivery(
    committed_database: Database, tmp_path: Path
) -> None:
    redis_url = require_redis()
    queue = f"specroute-killed-{uuid.uuid4().hex[:8]}"
    env = os.environ | {
        "SPECROUTE_DATABASE_URL": committed_database.url,
        "SPECROUTE_BROKER_URL": redis_url,
        "SPECROUTE_RESULT_BACKEND": redis_url,
        "SPECROUTE_DATA_DIR": str(tmp_path),
        "SPECROUTE_TEST_QUEUE": queue,
    }
    settings = ControlSettings(
        data_dir=tmp_path,
        database_url=committed_database.url,
        broker_url=redis_url,
        result_backend=redis_url,
    )
    sender = create_celery_app(settings, queue=queue)
    setup = sc.create_rollout(committed_database)
    sc.good_traffic(committed_database, setup)
    log = tmp_path / "workers.log"

    doomed = _worker(env | {"SPECROUTE_TEST_DIE_AFTER_TASK": "1"}, log)
    task_id = f"killed-{uuid.uuid4().hex}"
    sender.send_task(task_name("evaluate_canary"), args=[setup.rollout_id], task_id=task_id)
    try:
        assert doomed.wait(timeout=120) == 137, log.read_text()[-3000:]
    finally:
        if doomed.poll() is None:
            doomed.kill()
    # The flip is committed, the message is not acknowledged.
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage) == ("ramping", 5.0)
    first = sender.AsyncResult(task_id).get(timeout=10)
    assert first["action"] == "promote" and not first["replayed"]
    sender.AsyncResult(task_id).forget()

    survivor = _worker(env, log)
    try:
        # Redelivered after the visibility timeout (3 s) to the surviving worker, which
        # scans for unacknowledged messages every second (killed_worker_app).
        second = sender.AsyncResult(task_id).get(timeout=60, interval=0.2)
    finally:
        survivor.terminate()
        survivor.wait(timeout=30)
    assert second["replayed"] and second["decision_id"] == first["decision_id"], second
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage) == ("ramping", 5.0)
    promotes = [
        d for d in sc.decisions(committed_database, setup.rollout_id) if d.kind == "canary_promote"
    ]
    assert len(promotes) == 1 and promotes[0].task_id == task_id
    assert (
        sc.audit_actions(committed_database, setup.rollout_id).count(
            ("automation", "rollout.promote")
        )
        == 1
    )
    assert "Traceback" not in log.read_text()
