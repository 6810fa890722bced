"""The automation, top to bottom: a window lands → which rollouts to judge → gather
evidence → verdict → flip → record.

1. **A window lands.** `post_telemetry` stores it and, after the commit,
   `GuardDispatch.send` (`dispatch.py`) sends the rollout a `guard_rollout` task; the
   beat (`celery_app.py`) sends every sweep on its interval. Each Celery task
   (`tasks.py`) is one line onto `judge_one` or `judge_all` with its `Job`.
2. **Which rollouts to judge.** A job judges the rollouts in its states (`STATES`):
   `judge_all` lists them, `judge_one` skips one that has left them, and a task id
   already stored with a decision (a redelivery) returns that decision instead.
   Each rollout is judged in its own transaction, so one rollout's failure or lost
   race never undoes another's decision in the same sweep.
3. **Gather evidence.** The spec pool's health from its workers (`health.py`) and both
   arms' telemetry windows as statistics (`gather.py`, stored as `evidence.Evidence`).
4. **Verdict.** The job's pure rule (`verdict_of`: `verdicts.py`, `shadow.py`).
5. **Flip.** WAIT changes nothing; HOLD counts an inconclusive round; every other action
   is the state machine's own (`Action.flip`), applied with a compare-and-set on the
   version read (`flips.flip`).
6. **Record.** The flip's decision row keeps the evidence and its Markdown record
   (`records.py`); a flip that loses its compare-and-set is rolled back and then
   audited in a fresh transaction (`flips.record_lost_race`).

Depth advice (`depth.py`) runs steps 1-3 the same way and stores a recommendation
instead of a verdict.
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlalchemy.orm import Session

from control.automation import depth, repository
from control.automation.evidence import Evidence
from control.automation.flips import (
    AUTOMATION_ACTOR,
    Outcome,
    flip,
    record_hold,
    record_lost_race,
    replayed_outcome,
    seconds_since,
)
from control.automation.gather import gather_evidence
from control.automation.health import spec_pool_health
from control.automation.shadow import judge_offline, judge_shadow
from control.automation.verdicts import (
    Action,
    PoolHealth,
    Verdict,
    judge_canary,
    judge_guards,
    judge_probation,
)
from control.db import Database
from control.errors import ControlError
from control.models import Rollout, utcnow
from control.rollouts.gates import offline_gate
from control.settings import ControlSettings
from specwire import EXPOSING_STATES, RolloutState

log = logging.getLogger(__name__)


class Job(StrEnum):
    """What the automation does to a rollout; each has its Celery tasks (`tasks.py`)."""

    CANARY = "canary"  # canary, ramping, probation: promote, hold, pause, roll back
    SHADOW = "shadow"  # the shadow's exit: start the canary, roll back, hold
    OFFLINE = "offline"  # offline → shadow once the offline evaluation passes
    GUARD = "guard"  # every exposing state: disable or roll back on a guard
    PROBATION = "probation"  # disabled by automation: re-enable after the back-off
    DEPTH = "depth"  # advise the speculative length (no flip)


# -- 2. which rollouts to judge -------------------------------------------------------

STATES: dict[Job, tuple[RolloutState, ...]] = {
    Job.CANARY: (RolloutState.CANARY, RolloutState.RAMPING, RolloutState.PROBATION),
    Job.SHADOW: (RolloutState.SHADOW,),
    Job.OFFLINE: (RolloutState.OFFLINE,),
    Job.GUARD: tuple(sorted(EXPOSING_STATES)),
    Job.PROBATION: (RolloutState.DISABLED,),
    Job.DEPTH: tuple(sorted(EXPOSING_STATES)),
}


def judge_all(
    database: Database, settings: ControlSettings, job: Job, task_id: str | None
) -> list[Outcome]:
    """`judge_one` for every rollout in the job's states; one rollout's defect does not
    stop the rest."""
    with database.session() as session:
        ids = repository.rollout_ids_in_states(session, STATES[job])
    outcomes: list[Outcome] = []
    for rollout_id in ids:
        try:
            outcomes.append(judge_one(database, settings, job, rollout_id, task_id))
        except Exception:
            log.exception("automation job failed for rollout %s", rollout_id)
            outcomes.append(Outcome(rollout_id, "error", "job raised; see the worker log"))
    return outcomes


def judge_one(
    database: Database, settings: ControlSettings, job: Job, rollout_id: int, task_id: str | None
) -> Outcome:
    """One rollout, one transaction: skip replays and rollouts outside the job's states,
    judge, act; a flip that loses the compare-and-set is audited after the rollback."""
    try:
        with database.session() as session:
            replay = replayed_outcome(session, rollout_id, task_id)
            if replay is not None:
                return replay
            rollout = repository.get_rollout(session, rollout_id)
            if rollout is None:
                return Outcome(rollout_id, Action.WAIT.value, "rollout not found")
            if RolloutState(rollout.state) not in STATES[job]:
                return Outcome(rollout_id, Action.WAIT.value, f"state {rollout.state}")
            now = utcnow()
            if job is Job.DEPTH:
                return depth.advise(session, rollout, settings, now, task_id)
            return act(session, rollout, judge(session, job, rollout, settings, now), task_id)
    except FlipRejected as rejected:
        return record_lost_race(
            database,
            rollout_id,
            rejected.verdict,
            expected_version=rejected.expected_version,
            task_id=task_id,
            error=rejected.error,
        )


# -- 3. gather evidence, 4. verdict -----------------------------------------------------


@dataclass(frozen=True)
class Judged:
    """A verdict with what it rests on, and the decision row's kind should it flip."""

    verdict: Verdict
    kind: str
    evidence: Evidence | None = None
    health: PoolHealth | None = None


def judge(
    session: Session, job: Job, rollout: Rollout, settings: ControlSettings, now: datetime
) -> Judged:
    if job is Job.OFFLINE:
        # The same gate an admin `start` checks.
        return Judged(judge_offline(offline_gate(session, rollout)), "offline_passed")
    if job is Job.PROBATION:
        last = repository.latest_decision(session, rollout.id)
        if last is None or last.actor != AUTOMATION_ACTOR or last.to_state != rollout.state:
            # An admin disabled it (or changed it since): only an admin re-enables.
            return Judged(Verdict(Action.WAIT, "not disabled by automation"), "probation_enable")
        health = spec_pool_health(session, rollout, settings, now)
        verdict = judge_probation(
            rollout.disabled_reason,
            health,
            rollout.threshold_set,
            seconds_in_state=seconds_since(rollout.state_entered_at, now),
            disable_count=rollout.disable_count,
        )
        return Judged(verdict, "probation_enable", health=health)
    health = spec_pool_health(session, rollout, settings, now)
    evidence = gather_evidence(
        session, rollout, settings, until=now, spec_workers=health.healthy_workers
    )
    verdict = verdict_of(job, rollout, evidence, health, now)
    kind = f"{job.value}_{verdict.code or verdict.action.value}"
    return Judged(verdict, kind, evidence, health)


def verdict_of(
    job: Job, rollout: Rollout, evidence: Evidence, health: PoolHealth, now: datetime
) -> Verdict:
    """The pure rule of a job that reads the telemetry (also the readout's dry run)."""
    state, thresholds = RolloutState(rollout.state), rollout.threshold_set
    seconds_exposed = seconds_since(rollout.exposed_since or rollout.state_entered_at, now)
    seconds_in_state = seconds_since(rollout.state_entered_at, now)
    if job is Job.GUARD:
        return judge_guards(state, evidence, health, thresholds, seconds_exposed=seconds_exposed)
    if job is Job.SHADOW:
        return judge_shadow(
            evidence,
            thresholds,
            seconds_in_state=seconds_in_state,
            inconclusive_rounds=rollout.inconclusive_rounds,
        )
    assert job is Job.CANARY, job
    return judge_canary(
        state,
        evidence,
        thresholds,
        seconds_in_state=seconds_in_state,
        seconds_exposed=seconds_exposed,
        inconclusive_rounds=rollout.inconclusive_rounds,
    )


# -- 5. flip, 6. record -------------------------------------------------------------------


def act(session: Session, rollout: Rollout, judged: Judged, task_id: str | None) -> Outcome:
    """WAIT: nothing stored; HOLD: a counted round; otherwise the flip with its record."""
    verdict = judged.verdict
    if verdict.action is Action.WAIT:
        return Outcome(rollout.id, verdict.action.value, verdict.reason)
    if verdict.action is Action.HOLD:
        assert judged.evidence is not None, "only rules that read the evidence hold"
        return record_hold(session, rollout, verdict, evidence=judged.evidence, task_id=task_id)
    version = rollout.version
    try:
        return flip(
            session,
            rollout,
            verdict,
            kind=judged.kind,
            evidence=judged.evidence,
            health=judged.health,
            task_id=task_id,
        )
    except ControlError as exc:
        # Raised out of the `with` so the half-done transaction is rolled back first.
        raise FlipRejected(verdict, version, exc) from exc


class FlipRejected(Exception):
    """A flip lost its compare-and-set; `judge_one` audits it after the rollback."""

    def __init__(self, verdict: Verdict, expected_version: int, error: ControlError) -> None:
        super().__init__(str(error))
        self.verdict = verdict
        self.expected_version = expected_version
        self.error = error
