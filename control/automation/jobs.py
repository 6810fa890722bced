"""The jobs, one rollout at a time: read, judge, flip (compare-and-set) or record.

Each rollout is handled in its own transaction, so one rollout's failure or lost
race never undoes another's decision in the same sweep. A flip that loses its
compare-and-set is rolled back and then audited in a fresh transaction.
"""

import logging
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.orm import Session

from control.audit.service import record_audit
from control.automation import repository
from control.automation.evidence import Evidence, gather_evidence, json_safe
from control.automation.flips import (
    AUTOMATION_ACTOR,
    Outcome,
    flip,
    record_hold,
    record_lost_race,
    replayed_outcome,
    seconds_since,
)
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
from control.contract import EXPOSING_STATES, RolloutState
from control.db import Database
from control.errors import ControlError
from control.models import DepthRecommendation, Rollout, utcnow
from control.rollouts.gates import offline_gate
from control.settings import ControlSettings
from control.stats import StatsError, advise_depth, cost_ratio_from_speedup, expected_speedup

log = logging.getLogger(__name__)

EVALUATED_STATES = (RolloutState.CANARY, RolloutState.RAMPING, RolloutState.PROBATION)
SHADOW_STATES = (RolloutState.SHADOW,)
OFFLINE_STATES = (RolloutState.OFFLINE,)


def _run(
    database: Database,
    rollout_id: int,
    task_id: str | None,
    states: frozenset[RolloutState] | tuple[RolloutState, ...],
    judge: Callable[[Session, Rollout, datetime], Outcome],
) -> Outcome:
    """Open a transaction, skip replays and rollouts outside `states`, run `judge`;
    a flip that loses the compare-and-set is audited after the rollback."""
    try:
        with database.session() as session:
            replay = replayed_outcome(session, rollout_id, task_id)
            if replay is not None:
                return replay
            rollout = repository.get_rollout(session, rollout_id)
            if rollout is None:
                return Outcome(rollout_id, Action.WAIT.value, "rollout not found")
            if RolloutState(rollout.state) not in states:
                return Outcome(rollout_id, Action.WAIT.value, f"state {rollout.state}")
            return judge(session, rollout, utcnow())
    except _FlipRejected as rejected:
        return record_lost_race(
            database,
            rollout_id,
            rejected.verdict,
            expected_version=rejected.expected_version,
            task_id=task_id,
            error=rejected.error,
        )


class _FlipRejected(Exception):
    def __init__(self, verdict: Verdict, expected_version: int, error: ControlError) -> None:
        super().__init__(str(error))
        self.verdict = verdict
        self.expected_version = expected_version
        self.error = error


def _flip_or_raise(
    session: Session,
    rollout: Rollout,
    verdict: Verdict,
    kind: str,
    *,
    evidence: Evidence | None,
    health: PoolHealth | None,
    task_id: str | None,
) -> Outcome:
    version = rollout.version
    try:
        return flip(
            session, rollout, verdict, kind=kind, evidence=evidence, health=health, task_id=task_id
        )
    except ControlError as exc:
        # Raised out of the `with` so the half-done transaction is rolled back first.
        raise _FlipRejected(verdict, version, exc) from exc


StageRule = Callable[[Rollout, Evidence, datetime], Verdict]


def _evaluate(
    database: Database,
    settings: ControlSettings,
    rollout_id: int,
    task_id: str | None,
    *,
    states: tuple[RolloutState, ...],
    kind_prefix: str,
    rule: StageRule,
) -> Outcome:
    """Gather the evidence, apply the stage's rule: wait (no record), hold (a counted
    round) or flip (`<kind_prefix>_<code>`)."""

    def judge(session: Session, rollout: Rollout, now: datetime) -> Outcome:
        health = spec_pool_health(session, rollout, settings, now)
        evidence = gather_evidence(
            session, rollout, settings, until=now, spec_workers=health.healthy_workers
        )
        verdict = rule(rollout, evidence, now)
        if verdict.action is Action.WAIT:
            return Outcome(rollout.id, verdict.action.value, verdict.reason)
        if verdict.action is Action.HOLD:
            return record_hold(session, rollout, verdict, evidence=evidence, task_id=task_id)
        kind = f"{kind_prefix}_{verdict.code or verdict.action.value}"
        return _flip_or_raise(
            session, rollout, verdict, kind, evidence=evidence, health=health, task_id=task_id
        )

    return _run(database, rollout_id, task_id, states, judge)


def evaluate_canary(
    database: Database, settings: ControlSettings, rollout_id: int, task_id: str | None
) -> Outcome:
    def rule(rollout: Rollout, evidence: Evidence, now: datetime) -> Verdict:
        return judge_canary(
            RolloutState(rollout.state),
            evidence,
            rollout.threshold_set,
            seconds_in_state=seconds_since(rollout.state_entered_at, now),
            seconds_exposed=seconds_since(_exposed_since(rollout), now),
            inconclusive_rounds=rollout.inconclusive_rounds,
        )

    return _evaluate(
        database,
        settings,
        rollout_id,
        task_id,
        states=EVALUATED_STATES,
        kind_prefix="canary",
        rule=rule,
    )


def evaluate_shadow(
    database: Database, settings: ControlSettings, rollout_id: int, task_id: str | None
) -> Outcome:
    """The shadow's exit: start the canary, roll back, or hold (see `shadow.py`)."""

    def rule(rollout: Rollout, evidence: Evidence, now: datetime) -> Verdict:
        return judge_shadow(
            evidence,
            rollout.threshold_set,
            seconds_in_state=seconds_since(rollout.state_entered_at, now),
            inconclusive_rounds=rollout.inconclusive_rounds,
        )

    return _evaluate(
        database,
        settings,
        rollout_id,
        task_id,
        states=SHADOW_STATES,
        kind_prefix="shadow",
        rule=rule,
    )


def advance_offline(
    database: Database, settings: ControlSettings, rollout_id: int, task_id: str | None
) -> Outcome:
    """A rollout waiting in `offline` moves into shadow once an offline evaluation of its
    pair version meets the offline criteria (the same gate an admin `start` checks)."""

    def judge(session: Session, rollout: Rollout, now: datetime) -> Outcome:
        verdict = judge_offline(offline_gate(session, rollout))
        if verdict.action is Action.WAIT:
            return Outcome(rollout.id, verdict.action.value, verdict.reason)
        return _flip_or_raise(
            session, rollout, verdict, "offline_passed", evidence=None, health=None, task_id=task_id
        )

    return _run(database, rollout_id, task_id, OFFLINE_STATES, judge)


def guard_rollout(
    database: Database, settings: ControlSettings, rollout_id: int, task_id: str | None
) -> Outcome:
    def judge(session: Session, rollout: Rollout, now: datetime) -> Outcome:
        health = spec_pool_health(session, rollout, settings, now)
        evidence = gather_evidence(
            session, rollout, settings, until=now, spec_workers=health.healthy_workers
        )
        verdict = judge_guards(
            RolloutState(rollout.state),
            evidence,
            health,
            rollout.threshold_set,
            seconds_exposed=seconds_since(_exposed_since(rollout), now),
        )
        if verdict.action not in (Action.DISABLE, Action.ROLLBACK):
            return Outcome(rollout.id, verdict.action.value, verdict.reason)
        return _flip_or_raise(
            session,
            rollout,
            verdict,
            f"guard_{verdict.code}",
            evidence=evidence,
            health=health,
            task_id=task_id,
        )

    return _run(database, rollout_id, task_id, EXPOSING_STATES, judge)


def _exposed_since(rollout: Rollout) -> datetime:
    return rollout.exposed_since or rollout.state_entered_at


def probation_rollout(
    database: Database, settings: ControlSettings, rollout_id: int, task_id: str | None
) -> Outcome:
    def judge(session: Session, rollout: Rollout, now: datetime) -> Outcome:
        last = repository.latest_decision(session, rollout.id)
        if last is None or last.actor != AUTOMATION_ACTOR or last.to_state != rollout.state:
            # An admin disabled it (or changed it since): only an admin re-enables.
            return Outcome(rollout.id, Action.WAIT.value, "not disabled by automation")
        health = spec_pool_health(session, rollout, settings, now)
        verdict = judge_probation(
            rollout.disabled_reason,
            health,
            rollout.threshold_set,
            seconds_in_state=seconds_since(rollout.state_entered_at, now),
            disable_count=rollout.disable_count,
        )
        if verdict.action is not Action.ENABLE:
            return Outcome(rollout.id, verdict.action.value, verdict.reason)
        return _flip_or_raise(
            session,
            rollout,
            verdict,
            "probation_enable",
            evidence=None,
            health=health,
            task_id=task_id,
        )

    return _run(database, rollout_id, task_id, (RolloutState.DISABLED,), judge)


def advise_rollout_depth(
    database: Database, settings: ControlSettings, rollout_id: int, task_id: str | None
) -> Outcome:
    """Best speculative length from per-position acceptance and the cost ratio implied by
    the load-matched speedup of this stage; stored as a DepthRecommendation (no flip)."""

    def judge(session: Session, rollout: Rollout, now: datetime) -> Outcome:
        if task_id is not None and repository.recommendation_for_task(session, rollout.id, task_id):
            return Outcome(rollout.id, "recommend", "already advised by this task", replayed=True)
        health = spec_pool_health(session, rollout, settings, now)
        evidence = gather_evidence(
            session, rollout, settings, until=now, spec_workers=health.healthy_workers
        )
        acceptance = evidence.acceptance
        measured = evidence.stage.get("e2e_per_token")
        if acceptance is None or measured is None or acceptance.mean_acceptance_length is None:
            return Outcome(rollout.id, Action.WAIT.value, "; ".join(evidence.missing))
        current_k = rollout.pair_version.num_speculative_tokens
        try:
            cost_ratio = cost_ratio_from_speedup(
                measured.speedup, acceptance.mean_acceptance_length, current_k
            )
            advice = advise_depth(acceptance, cost_ratio, max(settings.depth_max_k, current_k))
            current = expected_speedup(
                acceptance.conditional_rates, current_k, cost_ratio, fill_rate=acceptance.alpha
            )
        except StatsError as exc:
            return Outcome(rollout.id, Action.WAIT.value, f"depth advice: {exc}")
        recommendation = DepthRecommendation(
            rollout_id=rollout.id,
            pair_version_id=rollout.pair_version_id,
            current_k=current_k,
            recommended_k=advice.best_k,
            expected_speedup_current=current,
            expected_speedup_recommended=advice.best_expected_speedup,
            evidence=json_safe(
                {
                    "advice": advice.model_dump(mode="json"),
                    "measured_speedup": measured.model_dump(mode="json"),
                    "acceptance": acceptance.model_dump(mode="json"),
                    "window_ids": evidence.spec.window_ids,
                    "threshold_set": evidence.thresholds.model_dump(mode="json"),
                    "task_id": task_id,
                    "actor": AUTOMATION_ACTOR,
                }
            ),
            task_id=task_id,
        )
        session.add(recommendation)
        session.flush()
        record_audit(
            session,
            actor=AUTOMATION_ACTOR,
            action="depth.recommend",
            entity_type="rollout",
            entity_id=rollout.id,
            after={
                "recommendation_id": recommendation.id,
                "current_k": current_k,
                "recommended_k": advice.best_k,
            },
            reason=(
                f"cost ratio {cost_ratio:.3f} from the load-matched speedup in end-to-end "
                "time per token"
            ),
        )
        return Outcome(
            rollout.id,
            "recommend",
            f"k={advice.best_k} (expected speedup {advice.best_expected_speedup:.3f} vs "
            f"{current:.3f} at k={current_k})",
        )

    return _run(database, rollout_id, task_id, EXPOSING_STATES, judge)


def sweep(
    database: Database,
    states: frozenset[RolloutState] | tuple[RolloutState, ...],
    job: Callable[[int], Outcome],
) -> list[Outcome]:
    """Run `job` for every rollout in `states`; one rollout's defect does not stop the rest."""
    with database.session() as session:
        ids = repository.rollout_ids_in_states(session, states)
    outcomes: list[Outcome] = []
    for rollout_id in ids:
        try:
            outcomes.append(job(rollout_id))
        except Exception:
            log.exception("automation job failed for rollout %s", rollout_id)
            outcomes.append(Outcome(rollout_id, "error", "job raised; see the worker log"))
    return outcomes
