"""The automation app for a worker subprocess that dies right after a task's commit.

Loaded by `celery -A tests.control.automation.killed_worker_app worker` in
test_worker_killed.py. With SPECROUTE_TEST_DIE_AFTER_TASK set, the process exits
(as if killed) once a task has run and stored its result, before Celery
acknowledges the message (task_acks_late): the moment a real crash would lose, which
cannot be produced on purpose otherwise.
"""

import os
from typing import Any

from celery.signals import task_postrun

from control.automation.app import create_celery_app
from control.settings import ControlSettings

app = create_celery_app(ControlSettings(), queue=os.environ["SPECROUTE_TEST_QUEUE"])
# A message not acknowledged within this many seconds is delivered again. kombu scans
# for such messages when a worker starts and then every interval x throttle seconds
# (10 x 10 by default): a survivor that starts within 3 s of the delivery would wait
# ~100 s for its next scan, so it scans every second here.
app.conf.broker_transport_options = {
    "visibility_timeout": 3,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}


def _die(**_: Any) -> None:
    os._exit(137)


if os.environ.get("SPECROUTE_TEST_DIE_AFTER_TASK"):
    task_postrun.connect(_die, weak=False)
