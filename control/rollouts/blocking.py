"""Blocking boundary cases: a regression on one blocks `start` into shadow whatever
the aggregate, and no waiver lifts it.

A case of the segment's eval set marked `blocking` (at an authorization,
privacy, safety or irreversible_action boundary) regresses in the candidate
evaluation (the latest of the rollout's pair version on the latest version of
the set, the one the offline gate reads) when:

- the candidate has no per-case result for it (not evaluated, or no evaluation
  at all: a blocking case needs evidence);
- its outcome is `error` (the engine failed it: no evidence, whatever the
  reference's outcome);
- its outcome is worse than in the reference evaluation (`ok` < `diverged` <
  `error`), or, with no reference result for the case, anything but `ok`;
- its acceptance was not measured (an evaluation whose `acceptance_source` is
  `engine_counters`: the engine had no per-request metrics, so the case result
  carries no drafts): the acceptance rule cannot be checked, and a blocking case
  is never passed on evidence that was not taken, with or without a reference;
- its acceptance rate is more than `ACCEPTANCE_SLACK` below the reference's.

The reference is the incumbent's evaluation: the latest offline evaluation with
per-case results measured per request (`acceptance_source` `per_request`), on an
eval set of the same name (any version), of the pair
version of the segment's latest other rollout that reached `full`. A segment
that never ran a pair in full has no reference; only the absolute rules apply.
Rerunning the candidate's evaluation cannot lower the bar: the reference is
never the candidate's own pair version.
"""

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.errors import Conflict
from control.evaluations import repository as eval_repo
from control.evaluations.schemas import OUTCOME_RANK, AcceptanceSource, CaseOutcome
from control.models import Decision, EvalCase, EvalSet, OfflineEvaluation, Rollout
from specwire import RolloutState

ACCEPTANCE_SLACK = 0.05
"""How far (absolute, accepted / drafted tokens) a blocking case's acceptance rate may
fall below the reference's before it counts as a regression (rerun noise)."""


class BlockingCaseRegression(Conflict):
    code = "blocking_case_regression"


@dataclass
class BlockingCheck:
    evaluation_id: int | None = None
    checked: list[str] = field(default_factory=list)
    reference_evaluation_id: int | None = None
    regressions: list[dict[str, Any]] = field(default_factory=list)

    def facts(self) -> dict[str, Any]:
        return {
            "evaluation_id": self.evaluation_id,
            "checked": self.checked,
            "reference_evaluation_id": self.reference_evaluation_id,
            "acceptance_slack": ACCEPTANCE_SLACK,
            "regressions": self.regressions,
        }


def reference_evaluation(
    session: Session, rollout: Rollout, set_name: str
) -> OfflineEvaluation | None:
    """The incumbent's latest evaluation with per-case results measured per request on
    this set name."""
    incumbent = session.scalar(
        select(Rollout.pair_version_id)
        .join(Decision, Decision.rollout_id == Rollout.id)
        .where(
            Rollout.segment_id == rollout.segment_id,
            Rollout.id != rollout.id,
            Rollout.pair_version_id != rollout.pair_version_id,
            Decision.to_state == RolloutState.FULL.value,
        )
        .order_by(Decision.id.desc())
        .limit(1)
    )
    if incumbent is None:
        return None
    return session.scalar(
        select(OfflineEvaluation)
        .join(EvalSet, EvalSet.id == OfflineEvaluation.eval_set_id)
        .where(
            OfflineEvaluation.pair_version_id == incumbent,
            EvalSet.name == set_name,
            OfflineEvaluation.case_result_count > 0,
            OfflineEvaluation.acceptance_source == AcceptanceSource.PER_REQUEST.value,
        )
        .order_by(OfflineEvaluation.id.desc())
        .limit(1)
    )


def _regression(
    case: EvalCase, got: Any, ref: Any, reference_id: int | None
) -> dict[str, Any] | None:
    doc: dict[str, Any] = {"case_key": case.case_key, "boundary": case.boundary}
    if got is None:
        return {**doc, "reason": "no per-case result in the candidate evaluation"}
    doc |= {"outcome": got.outcome, "acceptance_rate": got.acceptance_rate}
    if got.outcome == CaseOutcome.ERROR:
        # NOTE: even where the reference failed it too: equal outcomes are no evidence.
        return {**doc, "reason": "outcome error: the engine failed the case"}
    if got.drafts is None:
        return {
            **doc,
            "reason": "acceptance not measured (the evaluation's acceptance came from engine "
            "counters): rerun `specroute engine evaluate` on an engine started with "
            "--per-request-spec-decode-metrics detailed",
        }
    if ref is None:
        if got.outcome != "ok":
            return {**doc, "reason": f"outcome {got.outcome} (no reference result: must be ok)"}
        return None
    doc |= {"reference_outcome": ref.outcome, "reference_acceptance_rate": ref.acceptance_rate}
    if OUTCOME_RANK[got.outcome] > OUTCOME_RANK[ref.outcome]:
        return {
            **doc,
            "reason": f"outcome {got.outcome}, was {ref.outcome} in evaluation {reference_id}",
        }
    if (
        got.acceptance_rate is not None
        and ref.acceptance_rate is not None
        and got.acceptance_rate < ref.acceptance_rate - ACCEPTANCE_SLACK
    ):
        return {
            **doc,
            "reason": f"acceptance {got.acceptance_rate:.3f} < {ref.acceptance_rate:.3f} - "
            f"{ACCEPTANCE_SLACK} in evaluation {reference_id}",
        }
    return None


def check_blocking_cases(
    session: Session,
    rollout: Rollout,
    eval_set: EvalSet,
    candidate: OfflineEvaluation | None,
) -> BlockingCheck:
    check = BlockingCheck(evaluation_id=candidate.id if candidate is not None else None)
    blocking = [c for c in eval_set.cases if c.blocking]
    if not blocking:
        return check
    check.checked = [c.case_key for c in blocking]
    reference = reference_evaluation(session, rollout, eval_set.name)
    got = eval_repo.case_results(session, candidate.id) if candidate is not None else {}
    ref = eval_repo.case_results(session, reference.id) if reference is not None else {}
    check.reference_evaluation_id = reference.id if reference is not None else None
    for case in blocking:
        found = _regression(
            case, got.get(case.case_key), ref.get(case.case_key), check.reference_evaluation_id
        )
        if found is not None:
            check.regressions.append(found)
    return check


def blocked(rollout: Rollout, check: BlockingCheck) -> BlockingCaseRegression:
    """The 409 naming every regressed case, its boundary and why."""
    why = "; ".join(
        f"{r['case_key']} [{r['boundary']}]: {r['reason']}" for r in check.regressions[:10]
    )
    return BlockingCaseRegression(
        f"cannot start rollout {rollout.name}: {len(check.regressions)} blocking boundary "
        f"cases regressed ({why}); no waiver lifts this",
        details={"cases": [r["case_key"] for r in check.regressions], **check.facts()},
    )
