"""Guards on arrival: judge a rollout as soon as new evidence for it is stored.

The beat runs the guards every `guard_interval_s`; a telemetry batch that
brings a rollout's newest window also sends that rollout a `guard_rollout` task
(after the commit that stored it), so a regression is judged as soon as its
evidence lands instead of at the next tick. Sending is best effort: a broker
outage is logged and the beat still runs the guards.
"""

import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from control.settings import ControlSettings

if TYPE_CHECKING:
    from control.automation.celery_app import AutomationCelery

log = logging.getLogger(__name__)


class GuardDispatch:
    def __init__(self, settings: ControlSettings, app: "AutomationCelery | None" = None) -> None:
        self._settings = settings
        # Made on first use (Celery loads slowly) unless given, e.g. one on its own queue.
        self._app = app
        self._lock = threading.Lock()

    def _celery(self) -> "AutomationCelery":
        from control.automation.app import create_celery_app

        with self._lock:
            if self._app is None:
                self._app = create_celery_app(self._settings)
            return self._app

    def send(self, rollout_ids: Iterable[int]) -> int:
        """Send one guard task per rollout; returns how many were sent."""
        sent = 0
        try:
            from control.automation.tasks import task_name

            app = self._celery()
            for rollout_id in sorted(set(rollout_ids)):
                app.send_task(task_name("guard_rollout"), args=[rollout_id], retry=False)
                sent += 1
        except Exception as exc:
            log.warning("could not send guard tasks (the beat still runs them): %s", exc)
        return sent
