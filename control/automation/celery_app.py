"""The Celery app class and its configuration: broker and result backend from
`ControlSettings`, delivery semantics, beat schedule. The tasks register on it in
`control.automation.app.create_celery_app` (tasks import this module, never the
other way round).

Delivery semantics (why the jobs are written the way they are):

- `task_acks_late` + `task_reject_on_worker_lost`: a message is acknowledged only
  after its task returns, so a worker lost mid-task leaves the message to be
  delivered again. With Redis the unacknowledged message comes back after the
  transport's visibility timeout; with kombu's SQLAlchemy transport (the embedded
  default) a fetched row is hidden at once and only restored when the worker
  shuts down cleanly, so a hard kill can drop that message. Either way the
  jobs are periodic sweeps that re-read the database, so a lost message is
  repaired by the next beat and a redelivered one finds nothing left to do:
  every flip is a compare-and-set on the rollout's version, and a decision
  already stored under the task id is never taken twice.
- `worker_prefetch_multiplier=1`: a worker reserves one message at a time, so a
  long evaluation does not hold other rollouts' messages hostage.
"""

from datetime import timedelta
from functools import cached_property
from typing import Any

from celery import Celery

from control.db import Database
from control.settings import ControlSettings
from control.snapshot.notifier import install_snapshot_notifier

TASK_PREFIX = "specroute.automation"


class AutomationCelery(Celery):  # type: ignore[misc]
    """A Celery app that carries the control settings and a lazily opened Database, so
    tasks reach the database their app was configured for (tests use their own)."""

    def __init__(self, settings: ControlSettings, **kwargs: Any) -> None:
        super().__init__("specroute", **kwargs)
        self.specroute_settings = settings

    @cached_property
    def database(self) -> Database:
        database = Database(self.specroute_settings.resolved_database_url())
        # NOTE: flips made here must reach gateways as fast as admin flips do, so the
        # worker publishes snapshot bumps exactly like the API process.
        install_snapshot_notifier(database, redis_url=self.specroute_settings.redis_url)
        return database

    @cached_property
    def Beat(self) -> type:
        """`celery beat`'s program class: Celery's with a SIGTERM handler that stops beat
        in every phase of start-up (see `control.automation.beat`)."""
        return self.subclass_with_self("control.automation.beat:Beat")  # type: ignore[no-any-return]


def beat_schedule(settings: ControlSettings) -> dict[str, dict[str, Any]]:
    return {
        "evaluate-canaries": {
            "task": f"{TASK_PREFIX}.evaluate_canaries",
            "schedule": timedelta(seconds=settings.automation.evaluation_interval_s),
        },
        "advance-offline": {
            "task": f"{TASK_PREFIX}.advance_offlines",
            "schedule": timedelta(seconds=settings.automation.evaluation_interval_s),
        },
        "evaluate-shadows": {
            "task": f"{TASK_PREFIX}.evaluate_shadows",
            "schedule": timedelta(seconds=settings.automation.evaluation_interval_s),
        },
        "run-guards": {
            "task": f"{TASK_PREFIX}.run_guards",
            "schedule": timedelta(seconds=settings.automation.guard_interval_s),
        },
        "probation-sweep": {
            "task": f"{TASK_PREFIX}.probation_sweep",
            "schedule": timedelta(seconds=settings.automation.probation_interval_s),
        },
        "depth-advice": {
            "task": f"{TASK_PREFIX}.depth_advice",
            "schedule": timedelta(seconds=settings.automation.depth_interval_s),
        },
        "request-retention": {
            "task": f"{TASK_PREFIX}.purge_request_records",
            "schedule": timedelta(seconds=settings.automation.request_retention_interval_s),
        },
    }


def configure(app: AutomationCelery, settings: ControlSettings, queue: str) -> None:
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_default_queue=queue,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        timezone="UTC",
        enable_utc=True,
        result_extended=True,
        broker_connection_retry_on_startup=True,
        beat_schedule=beat_schedule(settings),
        # The beat schedule file lives with the other embedded state.
        beat_schedule_filename=str(settings.data_dir / "celerybeat-schedule"),
    )
