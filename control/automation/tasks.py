"""Celery tasks: named entry points onto the pipeline (`pipeline.py`), one line each.

A task hands the pipeline its app's database and settings, its job and its task id.
The task id is what makes a redelivery harmless: a decision stored under it is
found again and returned instead of decided anew (see `flips.replayed_outcome`).
Sweeps iterate rollouts in-process rather than fanning out one message per
rollout: a sweep is cheap, and a lost sweep is simply repeated by the next beat.
"""

from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

from control import clock
from control.automation import pipeline
from control.automation.celery_app import TASK_PREFIX, AutomationCelery
from control.automation.pipeline import Job
from control.requests.service import purge_expired

Result = dict[str, Any]


def _one(task: Any, job: Job, rollout_id: int) -> Result:
    app = cast(AutomationCelery, task.app)
    outcome = pipeline.judge_one(
        app.database, app.specroute_settings, job, rollout_id, task.request.id
    )
    return outcome.as_json()


def _all(task: Any, job: Job) -> list[Result]:
    app = cast(AutomationCelery, task.app)
    outcomes = pipeline.judge_all(app.database, app.specroute_settings, job, task.request.id)
    return [o.as_json() for o in outcomes]


def evaluate_canary(self: Any, rollout_id: int) -> Result:
    return _one(self, Job.CANARY, rollout_id)


def evaluate_canaries(self: Any) -> list[Result]:
    return _all(self, Job.CANARY)


def advance_offline(self: Any, rollout_id: int) -> Result:
    return _one(self, Job.OFFLINE, rollout_id)


def advance_offlines(self: Any) -> list[Result]:
    return _all(self, Job.OFFLINE)


def evaluate_shadow(self: Any, rollout_id: int) -> Result:
    return _one(self, Job.SHADOW, rollout_id)


def evaluate_shadows(self: Any) -> list[Result]:
    return _all(self, Job.SHADOW)


def guard_rollout(self: Any, rollout_id: int) -> Result:
    """Sent by `GuardDispatch` when a telemetry batch brings the rollout's newest window."""
    return _one(self, Job.GUARD, rollout_id)


def run_guards(self: Any) -> list[Result]:
    return _all(self, Job.GUARD)


def probation_rollout(self: Any, rollout_id: int) -> Result:
    return _one(self, Job.PROBATION, rollout_id)


def probation_sweep(self: Any) -> list[Result]:
    return _all(self, Job.PROBATION)


def advise_depth(self: Any, rollout_id: int) -> Result:
    return _one(self, Job.DEPTH, rollout_id)


def depth_advice(self: Any) -> list[Result]:
    return _all(self, Job.DEPTH)


def purge_request_records(self: Any) -> Result:
    """Retention: delete per-request records older than the configured period."""
    app = cast(AutomationCelery, self.app)
    days = app.specroute_settings.automation.request_record_retention_days
    deleted = purge_expired(app.database, retention=timedelta(days=days), now=clock.now())
    return {"deleted": deleted, "retention_days": days}


TASKS: tuple[Callable[..., Any], ...] = (
    evaluate_canary,
    evaluate_canaries,
    advance_offline,
    advance_offlines,
    evaluate_shadow,
    evaluate_shadows,
    guard_rollout,
    run_guards,
    probation_rollout,
    probation_sweep,
    advise_depth,
    depth_advice,
    purge_request_records,
)


def register_tasks(app: AutomationCelery) -> None:
    for fn in TASKS:
        app.task(name=task_name(fn.__name__), bind=True)(fn)


def task_name(name: str) -> str:
    return f"{TASK_PREFIX}.{name}"
