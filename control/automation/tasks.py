"""Celery tasks: thin wrappers that hand a job its database, settings and task id.

The task id is what makes a redelivery harmless: a decision stored under it is
found again and returned instead of decided anew (see `flips.replayed_outcome`).
Sweeps iterate rollouts in-process rather than fanning out one message per
rollout: a sweep is cheap, and a lost sweep is simply repeated by the next beat.
"""

from collections.abc import Callable
from datetime import timedelta
from typing import Any, cast

from control import clock
from control.automation import jobs
from control.automation.celery_app import TASK_PREFIX, AutomationCelery
from control.automation.flips import Outcome
from control.contract import EXPOSING_STATES, RolloutState
from control.db import Database
from control.requests.service import purge_expired
from control.settings import ControlSettings

Result = dict[str, Any]
RolloutJob = Callable[[Database, ControlSettings, int, str | None], Outcome]


def _context(task: Any) -> tuple[AutomationCelery, str | None]:
    task_id: str | None = task.request.id
    return cast(AutomationCelery, task.app), task_id


def _one(job: RolloutJob) -> Callable[..., Result]:
    def run(self: Any, rollout_id: int) -> Result:
        app, task_id = _context(self)
        outcome: Outcome = job(app.database, app.specroute_settings, rollout_id, task_id)
        return outcome.as_json()

    return run


def _sweep(
    job: RolloutJob, states: frozenset[RolloutState] | tuple[RolloutState, ...]
) -> Callable[..., list[Result]]:
    def run(self: Any) -> list[Result]:
        app, task_id = _context(self)
        outcomes = jobs.sweep(
            app.database,
            states,
            lambda rid: job(app.database, app.specroute_settings, rid, task_id),
        )
        return [o.as_json() for o in outcomes]

    return run


def _purge_request_records(self: Any) -> Result:
    """Retention: delete per-request records older than the configured period."""
    app, _task_id = _context(self)
    days = app.specroute_settings.request_record_retention_days
    deleted = purge_expired(app.database, retention=timedelta(days=days), now=clock.now())
    return {"deleted": deleted, "retention_days": days}


TASKS: dict[str, Callable[..., Any]] = {
    "evaluate_canary": _one(jobs.evaluate_canary),
    "evaluate_canaries": _sweep(jobs.evaluate_canary, jobs.EVALUATED_STATES),
    "advance_offline": _one(jobs.advance_offline),
    "advance_offlines": _sweep(jobs.advance_offline, jobs.OFFLINE_STATES),
    "evaluate_shadow": _one(jobs.evaluate_shadow),
    "evaluate_shadows": _sweep(jobs.evaluate_shadow, jobs.SHADOW_STATES),
    "guard_rollout": _one(jobs.guard_rollout),
    "run_guards": _sweep(jobs.guard_rollout, EXPOSING_STATES),
    "probation_rollout": _one(jobs.probation_rollout),
    "probation_sweep": _sweep(jobs.probation_rollout, (RolloutState.DISABLED,)),
    "advise_depth": _one(jobs.advise_rollout_depth),
    "depth_advice": _sweep(jobs.advise_rollout_depth, EXPOSING_STATES),
    "purge_request_records": _purge_request_records,
}


def register_tasks(app: AutomationCelery) -> None:
    for name, fn in TASKS.items():
        app.task(name=f"{TASK_PREFIX}.{name}", bind=True)(fn)


def task_name(name: str) -> str:
    return f"{TASK_PREFIX}.{name}"
