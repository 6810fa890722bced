"""Rollouts and `transition_rollout`, the one way a rollout changes state.

Admin actions and the Celery automation both call `transition_rollout`; the
compare-and-set on `version` means two writers can never lose each other's
update: the loser gets PreconditionFailed (412).
"""

import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from control.audit.service import record_audit
from control.decisions.record import render_manual
from control.domain import Change, NameTaken, create_recorded
from control.errors import Conflict, InvalidRequest
from control.models import Decision, PairVersion, Pool, Rollout, Segment, ThresholdSet, utcnow
from control.repository import get_row
from control.rollouts import repository as repo
from control.rollouts.blocking import blocked
from control.rollouts.gates import GateResult, StageGate, offline_gate
from control.rollouts.schemas import DepthLadderIn, RolloutCreate, RolloutUpdate
from control.rollouts.state_machine import (
    BEFORE_SHADOW,
    IllegalTransition,
    RolloutAction,
    plan,
)
from control.rollouts.targets import check_same_target
from specwire import EXPOSING_STATES, DepthLadder, DepthRung, RolloutState


class RolloutConflict(Conflict):
    code = "rollout_conflict"


class IllegalRolloutTransition(Conflict):
    code = "illegal_transition"


class MissingEvidence(Conflict):
    code = "missing_evidence"


def _stage_gates(
    session: Session,
    rollout: Rollout,
    *,
    skip_shadow: bool,
    waive: frozenset[StageGate],
    proven: frozenset[StageGate],
) -> dict[str, Any]:
    """The evidence `start` needs from this state; raises BlockingCaseRegression (409,
    waived or not) when a blocking boundary case regressed, MissingEvidence (409)
    naming what is missing and not waived. Returns what the decision row keeps."""
    state = RolloutState(rollout.state)
    results: list[GateResult] = []
    if state in BEFORE_SHADOW:
        results.append(offline_gate(session, rollout))
    if state is RolloutState.SHADOW or skip_shadow:
        shadow = GateResult(StageGate.SHADOW)
        if StageGate.SHADOW not in proven:
            shadow.missing.append(
                "the shadow's exit criterion has not held (the automation starts the canary "
                "when acceptance is accepted and latency is within bounds at the measured load)"
                if state is RolloutState.SHADOW
                else "no shadow stage has run"
            )
        results.append(shadow)
    for result in results:
        if result.blocking is not None and result.blocking.regressions:
            raise blocked(rollout, result.blocking)
    missing = [r for r in results if not r.holds and r.evidence not in waive]
    if missing:
        names = [r.evidence.value for r in missing]
        raise MissingEvidence(
            f"cannot start rollout {rollout.name}: missing {', '.join(names)}: "
            + "; ".join(m for r in missing for m in r.missing),
            details={
                "missing_evidence": names,
                "reasons": {r.evidence.value: r.missing for r in missing},
                "facts": {r.evidence.value: r.facts for r in missing},
            },
        )
    gates = {r.evidence.value: {"holds": r.holds, **r.facts} for r in results}
    waived = sorted(r.evidence.value for r in results if not r.holds)
    return {"gates": gates, **({"waived": waived} if waived else {})}


def rollout_state(r: Rollout) -> dict[str, Any]:
    return {
        "name": r.name,
        "state": r.state,
        "percentage": r.percentage,
        "paused_from": r.paused_from,
        "stages": r.stages,
        "threshold_set_id": r.threshold_set_id,
        "depth_ladder": r.depth_ladder,
        "version": r.version,
    }


def get_rollout(session: Session, rollout_id: int) -> Rollout:
    return repo.ROLLOUTS.get_or_raise(session, rollout_id)


def _require(session: Session, model: type[Any], ident: int, param: str) -> Any:
    row = get_row(session, model, ident)
    if row is None:
        raise InvalidRequest(f"{param} {ident} does not exist", details={"param": param})
    return row


def create_rollout(
    session: Session, body: RolloutCreate, *, actor: str, model_roots: Sequence[Path]
) -> Rollout:
    if repo.ROLLOUTS.by_name(session, body.name) is not None:
        raise NameTaken("rollout", f"a rollout named {body.name!r} exists")
    _require(session, Segment, body.segment_id, "segment_id")
    version: PairVersion = _require(session, PairVersion, body.pair_version_id, "pair_version_id")
    spec: Pool = _require(session, Pool, body.spec_pool_id, "spec_pool_id")
    baseline: Pool = _require(session, Pool, body.baseline_pool_id, "baseline_pool_id")
    _require(session, ThresholdSet, body.threshold_set_id, "threshold_set_id")
    if version.status != "active":
        raise InvalidRequest(
            f"pair version {version.id} is retired", details={"param": "pair_version_id"}
        )
    if spec.pair_version_id != version.id:
        raise InvalidRequest(
            f"spec pool {spec.name!r} does not serve pair version {version.id}",
            details={"param": "spec_pool_id"},
        )
    if baseline.pair_version_id is not None:
        raise InvalidRequest(
            f"baseline pool {baseline.name!r} speculates; a baseline pool has no pair version",
            details={"param": "baseline_pool_id"},
        )
    check_same_target(spec, baseline, model_roots=model_roots)
    open_ = repo.open_rollouts_of_segment(session, body.segment_id)
    if open_:
        raise RolloutConflict(
            f"segment {body.segment_id} already has rollout {open_[0]!r}; roll it back first",
            details={"rollouts": open_},
        )
    rollout = Rollout(
        **body.model_dump(),
        state=RolloutState.DRAFT.value,
        percentage=0.0,
        cohort_salt=secrets.token_hex(16),
        version=1,
    )
    return create_recorded(session, rollout, entity="rollout", state=rollout_state, actor=actor)


def update_rollout(
    session: Session, rollout_id: int, body: RolloutUpdate, *, expected_version: int, actor: str
) -> Rollout:
    change = Change.load(
        session, repo.ROLLOUTS, rollout_id, state=rollout_state, expected_version=expected_version
    )
    rollout = change.row
    values: dict[str, Any] = {}
    if body.stages is not None:
        values["stages"] = body.stages
    if body.threshold_set_id is not None:
        _require(session, ThresholdSet, body.threshold_set_id, "threshold_set_id")
        values["threshold_set_id"] = body.threshold_set_id
    if "depth_ladder" in body.model_fields_set:
        ladder = body.depth_ladder
        values["depth_ladder"] = None if ladder is None else _depth_ladder(session, rollout, ladder)
    return change.save(values, actor=actor)


# The fields of sibling pair versions that must be equal on a depth ladder: everything
# but the depth (and the version's own id, label and number). NOTE: the pair and the
# weights by digest, not only by path: a rung on another pair, or on a draft or target
# rewritten under the same path, would make the rollout's guards (which see all rungs'
# requests under the rollout's pair version) judge another model pair.
LADDER_SAME = (
    "pair_id",
    "method",
    "target_ref",
    "target_digest",
    "draft_ref",
    "draft_digest",
    "tokenizer_hash",
    "chat_template_hash",
    "draft_sample_method",
    "adapter_id",
    "engine_version",
    "capabilities",
)


def _depth_ladder(session: Session, rollout: Rollout, body: DepthLadderIn) -> dict[str, Any]:
    """The ladder as the snapshot carries it, each rung's k from its pool's pair version;
    422 `depth_ladder_invalid` naming the rung and the field when the pools do not serve
    siblings that differ only in k, deepest first, including the rollout's own pool."""
    own: PairVersion = rollout.pair_version
    spec: Pool = rollout.spec_pool
    rungs: list[dict[str, Any]] = []
    for i, rung in enumerate(body.rungs):
        param = f"depth_ladder.rungs[{i}].pool_id"
        pool: Pool = _require(session, Pool, rung.pool_id, param)
        if pool.pair_version_id is None:
            raise LadderInvalid(f"pool {pool.name!r} is a baseline pool", details={"param": param})
        version = session.get(PairVersion, pool.pair_version_id)
        assert version is not None
        differs = [f for f in LADDER_SAME if getattr(version, f) != getattr(own, f)]
        if pool.served_model_name != spec.served_model_name or pool.target_ref != spec.target_ref:
            differs.insert(0, "served_model_name/target_ref")
        if differs:
            other_pair = (
                f" of pair {version.pair.name!r}, not {own.pair.name!r}"
                if version.pair_id != own.pair_id
                else ""
            )
            raise LadderInvalid(
                f"pool {pool.name!r} serves pair version {version.id}{other_pair}, which differs "
                f"from the rollout's pair version {own.id} in more than k: {', '.join(differs)}",
                details={"param": param, "fields": differs},
            )
        if version.status != "active":
            raise LadderInvalid(f"pair version {version.id} is retired", details={"param": param})
        rungs.append(
            {
                "pool_id": pool.id,
                "num_speculative_tokens": version.num_speculative_tokens,
                "max_load": rung.max_load,
            }
        )
    ks = [r["num_speculative_tokens"] for r in rungs]
    if ks != sorted(set(ks), reverse=True):
        raise LadderInvalid(
            f"the rungs' depths must decrease strictly (deepest first); got k = {ks}",
            details={"param": "depth_ladder.rungs", "k": ks},
        )
    if all(r["pool_id"] != rollout.spec_pool_id for r in rungs):
        raise LadderInvalid(
            f"the ladder must include the rollout's spec pool {rollout.spec_pool_id}",
            details={"param": "depth_ladder.rungs"},
        )
    ladder = DepthLadder(
        rungs=[DepthRung.model_validate(r) for r in rungs],
        hysteresis=body.hysteresis,
        min_dwell_s=body.min_dwell_s,
        load_smoothing_s=body.load_smoothing_s,
        acceptance_reset=body.acceptance_reset,
    )
    return ladder.model_dump()


class LadderInvalid(InvalidRequest):
    code = "depth_ladder_invalid"


def transition_rollout(
    session: Session,
    rollout_id: int,
    action: RolloutAction,
    *,
    expected_version: int | None,
    actor: str,
    reason: str | None,
    evidence: dict[str, Any] | None,
    task_id: str | None,
    kind: str | None,
    waive: frozenset[StageGate] = frozenset(),
    proven: frozenset[StageGate] = frozenset(),
) -> Rollout:
    """Apply `action` as a compare-and-set on the rollout's version.

    `expected_version` None means "the version read here": the state machine's
    plan is still only applied if nobody changed the rollout in between.
    `start` needs its stage's evidence: `proven` is what the caller (the
    automation) established itself, `waive` what an admin chose to go without
    (a waived shadow starts the canary directly); both are recorded.
    Raises RolloutNotFound, PreconditionFailed (lost race or stale expectation),
    IllegalRolloutTransition (409, naming the allowed actions) and
    MissingEvidence (409, naming the evidence a `start` lacks) and
    BlockingCaseRegression (409, naming the blocking cases that regressed).
    """
    change = Change.load(
        session, repo.ROLLOUTS, rollout_id, state=rollout_state, expected_version=expected_version
    )
    rollout = change.row
    try:
        step = plan(
            action,
            RolloutState(rollout.state),
            rollout.percentage,
            list(rollout.stages),
            paused_from=RolloutState(rollout.paused_from) if rollout.paused_from else None,
            probation_percentage=rollout.threshold_set.probation_percentage,
            shadow_percentage=rollout.threshold_set.shadow_percentage,
            skip_shadow=StageGate.SHADOW in waive,
        )
    except IllegalTransition as exc:
        allowed = [a.value for a in exc.allowed]
        raise IllegalRolloutTransition(
            str(exc), details={"state": rollout.state, "allowed_actions": allowed}
        ) from exc
    if action is RolloutAction.START:
        gate_evidence = _stage_gates(
            session, rollout, skip_shadow=StageGate.SHADOW in waive, waive=waive, proven=proven
        )
        evidence = {**gate_evidence, **(evidence or {})}
        if "waived" in gate_evidence and not (reason and reason.strip()):
            raise InvalidRequest("waiving evidence needs a reason", details={"param": "reason"})
    values: dict[str, Any] = {
        "state": step.to_state.value,
        "percentage": step.to_percentage,
        "paused_from": step.paused_from.value if step.paused_from else None,
        "state_entered_at": utcnow(),
        "inconclusive_rounds": 0,
    }
    exposing_now = step.to_state in EXPOSING_STATES
    if exposing_now and step.from_state not in EXPOSING_STATES:
        # A new exposure: the sequential monitors start over from here.
        values["exposed_since"] = values["state_entered_at"]
    if action is RolloutAction.DISABLE:
        values["disable_count"] = Rollout.disable_count + 1
        values["disabled_reason"] = (kind or reason or "manual")[:100]
    elif step.to_state is not RolloutState.PAUSED:
        values["disabled_reason"] = None
    change.apply(values)
    decision = Decision(
        rollout_id=rollout.id,
        kind=kind or f"manual_{action.value}",
        from_state=step.from_state.value,
        to_state=step.to_state.value,
        from_percentage=step.from_percentage,
        to_percentage=step.to_percentage,
        rollout_version=rollout.version,
        evidence=evidence or {},
        threshold_set_id=rollout.threshold_set_id,
        actor=actor,
        task_id=task_id,
    )
    session.add(decision)
    session.flush()
    # Every flip gets its record; the automation replaces this one with its own,
    # rendered from the evidence its rule saw.
    decision.record_markdown = render_manual(rollout, decision, reason)
    change.record(actor=actor, action=f"rollout.{action.value}", reason=reason)
    if evidence and evidence.get("waived"):
        # A waiver is its own audit event, so overrides can be listed and reviewed.
        record_audit(
            session,
            actor=actor,
            action="rollout.waive",
            entity_type="rollout",
            entity_id=rollout.id,
            after={"decision_id": decision.id, "waived": evidence["waived"]},
            reason=reason,
        )
    return rollout


def delete_rollout(
    session: Session, rollout_id: int, *, expected_version: int | None, actor: str
) -> None:
    change = Change.load(
        session, repo.ROLLOUTS, rollout_id, state=rollout_state, expected_version=expected_version
    )
    # NOTE: only drafts go; a rollout that ever moved keeps its decisions as history.
    if change.row.state != RolloutState.DRAFT.value:
        raise RolloutConflict(
            f"rollout in state {change.row.state} cannot be deleted; only drafts can"
        )
    change.delete(actor=actor)
