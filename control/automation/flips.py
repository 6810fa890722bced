"""Flipping a rollout on behalf of automation, and recording what did not flip.

Every flip goes through `transition_rollout` with the version the job read: a
compare-and-set, so a concurrent admin change or a second delivery of the same
task makes the flip fail with PreconditionFailed instead of overwriting. The
decision row carries the task id; `decision_for_task` finds it again, which is
how a redelivered task recognises work it already did.
"""

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from control.audit.service import record_audit
from control.automation import repository
from control.automation.evidence import Evidence, json_safe
from control.automation.records import RecordContext, render_record
from control.automation.verdicts import Action, PoolHealth, Verdict
from control.db import Database
from control.models import Decision, Rollout, utcnow
from control.rollouts.gates import StageGate
from control.rollouts.service import transition_rollout

log = logging.getLogger(__name__)

AUTOMATION_ACTOR = "automation"


@dataclass(frozen=True)
class Outcome:
    """What a job did to one rollout; JSON-able for the task result."""

    rollout_id: int
    action: str
    reason: str
    decision_id: int | None = None
    to_state: str | None = None
    replayed: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "rollout_id": self.rollout_id,
            "action": self.action,
            "reason": self.reason,
            "decision_id": self.decision_id,
            "to_state": self.to_state,
            "replayed": self.replayed,
        }


def replayed_outcome(session: Session, rollout_id: int, task_id: str | None) -> Outcome | None:
    """The outcome this task already stored for the rollout (a redelivery), if any."""
    if task_id is None:
        return None
    done = repository.decision_for_task(session, rollout_id, task_id)
    if done is None:
        return None
    return Outcome(
        rollout_id=rollout_id,
        action=done.kind,
        reason="already decided by this task",
        decision_id=done.id,
        to_state=done.to_state,
        replayed=True,
    )


def evidence_document(
    verdict: Verdict,
    evidence: Evidence | None,
    health: PoolHealth | None,
    task_id: str | None,
    rollout: Rollout,
    *,
    with_blocks: bool = True,
) -> dict[str, Any]:
    """The decision row's evidence. Flips keep the block estimates the monitors consumed
    (enough to recompute them); holds, written every evaluation, keep the summaries."""
    thresholds = rollout.threshold_set
    doc: dict[str, Any] = {
        "verdict": {
            "action": verdict.action.value,
            "reason": verdict.reason,
            "code": verdict.code,
            "checks": verdict.checks,
            "advice": verdict.advice,
        },
        "threshold_set": {
            "id": thresholds.id,
            "name": thresholds.name,
            "version": thresholds.version,
        },
        "task_id": task_id,
        "actor": AUTOMATION_ACTOR,
        "rollout_version_read": rollout.version,
        "inconclusive_rounds": rollout.inconclusive_rounds,
        "window_ids": evidence.window_ids if evidence is not None else [],
    }
    if evidence is not None:
        doc["statistics"] = evidence.as_json(with_blocks=with_blocks)
    if health is not None:
        doc["spec_pool"] = {
            "workers": health.workers,
            "healthy_workers": health.healthy_workers,
            "pressured_workers": health.pressured_workers,
            "max_kv_cache_usage": health.max_kv_cache_usage,
            "draft_available": health.draft_available,
            "unavailable_seconds": health.unavailable_seconds,
            "mismatched_workers": health.mismatched_workers,
            "mismatch": health.mismatch,
        }
    safe: dict[str, Any] = json_safe(doc)
    return safe


def flip(
    session: Session,
    rollout: Rollout,
    verdict: Verdict,
    *,
    kind: str,
    evidence: Evidence | None,
    health: PoolHealth | None,
    task_id: str | None,
) -> Outcome:
    """Apply the verdict with a compare-and-set on the version read; raises
    PreconditionFailed when someone else flipped first (the caller records it)."""
    action = verdict.action.flip
    assert action is not None, f"{verdict.action} changes no state"
    document = evidence_document(verdict, evidence, health, task_id, rollout)
    updated = transition_rollout(
        session,
        rollout.id,
        action,
        expected_version=rollout.version,
        actor=AUTOMATION_ACTOR,
        reason=verdict.reason,
        evidence=document,
        task_id=task_id,
        kind=kind,
        # Only the shadow rule starts a canary, and only on its exit criterion.
        proven=frozenset({StageGate.SHADOW}) if verdict.action is Action.START else frozenset(),
    )
    decision = repository.latest_decision(session, updated.id)
    assert decision is not None, "transition_rollout writes a decision row"
    decision.record_markdown = render_record(
        RecordContext(
            rollout=updated,
            thresholds=updated.threshold_set,
            decision=decision,
            decided_at=utcnow(),
        ),
        verdict,
        evidence,
        health,
    )
    if verdict.action is Action.DISABLE:
        updated.disabled_reason = verdict.code
    session.flush()
    log.info(
        "rollout %s: %s %s → %s (%s)",
        rollout.id,
        verdict.action,
        decision.from_state,
        updated.state,
        kind,
    )
    return Outcome(
        rollout_id=rollout.id,
        action=verdict.action.value,
        reason=verdict.reason,
        decision_id=decision.id,
        to_state=updated.state,
    )


def record_hold(
    session: Session,
    rollout: Rollout,
    verdict: Verdict,
    *,
    evidence: Evidence,
    task_id: str | None,
) -> Outcome:
    """An inconclusive round: count it (compare-and-set, no version bump) and keep the
    evidence as a `hold` decision that changes no state, so the round is auditable
    and a redelivery of the task does not count it twice."""
    if not repository.count_inconclusive_round(session, rollout.id, rollout.version):
        return Outcome(rollout.id, "lost_race", "rollout changed while evaluating")
    document = evidence_document(verdict, evidence, None, task_id, rollout, with_blocks=False)
    decision = Decision(
        rollout_id=rollout.id,
        kind="hold",
        from_state=rollout.state,
        to_state=rollout.state,
        from_percentage=rollout.percentage,
        to_percentage=rollout.percentage,
        rollout_version=rollout.version,
        evidence=document,
        threshold_set_id=rollout.threshold_set_id,
        actor=AUTOMATION_ACTOR,
        task_id=task_id,
    )
    session.add(decision)
    record_audit(
        session,
        actor=AUTOMATION_ACTOR,
        action="rollout.hold",
        entity_type="rollout",
        entity_id=rollout.id,
        before={"inconclusive_rounds": rollout.inconclusive_rounds},
        after={"inconclusive_rounds": rollout.inconclusive_rounds + 1},
        reason=verdict.reason,
    )
    session.flush()
    return Outcome(rollout.id, Action.HOLD.value, verdict.reason, decision.id, rollout.state)


def record_lost_race(
    database: Database,
    rollout_id: int,
    verdict: Verdict,
    *,
    expected_version: int,
    task_id: str | None,
    error: Exception,
) -> Outcome:
    """The flip lost a compare-and-set: audit the attempt in its own transaction (the
    failed one was rolled back) so both writers' attempts stay on record."""
    with database.session() as session:
        current = repository.get_rollout(session, rollout_id)
        record_audit(
            session,
            actor=AUTOMATION_ACTOR,
            action=f"rollout.{verdict.action.value}.rejected",
            entity_type="rollout",
            entity_id=rollout_id,
            before={"version": expected_version},
            after={
                "version": current.version if current else None,
                "state": current.state if current else None,
                "task_id": task_id,
            },
            reason=f"{verdict.reason} — not applied: {error}",
        )
    return Outcome(rollout_id, "lost_race", str(error))


def seconds_since(moment: datetime, now: datetime) -> float:
    return max((now - moment).total_seconds(), 0.0)
