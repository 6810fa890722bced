"""The automation app for a beat subprocess that is sent SIGTERM while its scheduler
is being created.

Loaded by `celery -A tests.control.cli.sigterm_beat_app beat` in
test_celery_beat_stop.py. The scheduler sends its own process SIGTERM once the
schedule file is open, before the schedule is set up: the moment a supervisor's
SIGTERM can land right after "beat: Starting", which from outside the process is
hit only by chance (a window of some 30 ms). Each scheduler created prints one
line, so the test sees whether the signal made beat create another.
"""

import os
import shelve
import signal
from typing import Any

from celery.beat import PersistentScheduler

from control.automation.app import create_celery_app
from control.settings import ControlSettings

CREATED = "sigterm-test: scheduler created"


class SigtermWhileCreated(PersistentScheduler):  # type: ignore[misc]
    signalled = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if not kwargs.get("lazy"):
            print(CREATED, flush=True)
        super().__init__(*args, **kwargs)

    def _open_schedule(self) -> shelve.Shelf[Any]:
        store: shelve.Shelf[Any] = super()._open_schedule()
        if not SigtermWhileCreated.signalled:
            SigtermWhileCreated.signalled = True
            os.kill(os.getpid(), signal.SIGTERM)
        return store


app = create_celery_app(ControlSettings())
app.conf.beat_scheduler = f"{__name__}:SigtermWhileCreated"
