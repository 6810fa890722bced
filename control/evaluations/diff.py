"""What changed between two offline evaluations, case by case (`evaluations diff`).

Both must carry per-case results. Cases are matched by key (the two may be on
different versions of a set, or of different pair versions: that is the point).
A case changed when its outcome moved (`ok` < `diverged` < `error`, worse is a
higher rank) or its acceptance rate moved; the ones that changed most come
first: the largest outcome move (a worsening before an improvement of the same
size), then the largest absolute acceptance change, then the key.
"""

from sqlalchemy.orm import Session

from control.errors import Conflict
from control.evaluations import repository as repo
from control.evaluations.schemas import OUTCOME_RANK, CaseChange, EvaluationDiff
from control.evaluations.service import get_evaluation
from control.models import EvaluationCaseResult, OfflineEvaluation


class NoCaseResults(Conflict):
    code = "no_case_results"


def _change(
    key: str, before: EvaluationCaseResult, after: EvaluationCaseResult, boundary: str | None
) -> CaseChange:
    moved = OUTCOME_RANK[after.outcome] - OUTCOME_RANK[before.outcome]
    delta = (
        None
        if before.acceptance_rate is None or after.acceptance_rate is None
        else after.acceptance_rate - before.acceptance_rate
    )
    return CaseChange(
        case_key=key,
        outcome_before=before.outcome,
        outcome_after=after.outcome,
        outcome_change="worse" if moved > 0 else "better" if moved < 0 else "same",
        acceptance_before=before.acceptance_rate,
        acceptance_after=after.acceptance_rate,
        acceptance_delta=delta,
        completion_tokens_before=before.completion_tokens,
        completion_tokens_after=after.completion_tokens,
        boundary=boundary,
    )


def _order(change: CaseChange) -> tuple[int, int, float, str]:
    moved = OUTCOME_RANK[change.outcome_after] - OUTCOME_RANK[change.outcome_before]
    return (-abs(moved), -int(moved > 0), -abs(change.acceptance_delta or 0.0), change.case_key)


def _with_results(evaluation: OfflineEvaluation) -> OfflineEvaluation:
    if evaluation.case_result_count == 0:
        raise NoCaseResults(
            f"offline evaluation {evaluation.id} carries no per-case results (posted with "
            "aggregates only); rerun `specroute engine evaluate` to compare cases",
            details={"evaluation_id": evaluation.id},
        )
    return evaluation


def diff_evaluations(
    session: Session, before_id: int, after_id: int, *, limit: int
) -> EvaluationDiff:
    before = _with_results(get_evaluation(session, before_id))
    after = _with_results(get_evaluation(session, after_id))
    old, new = repo.case_results(session, before.id), repo.case_results(session, after.id)
    boundaries = repo.boundaries(session, after.eval_set_id)
    changes = [
        _change(key, old[key], new[key], boundaries.get(key)) for key in sorted(old.keys() & new)
    ]
    changed = sorted(
        (c for c in changes if c.outcome_change != "same" or (c.acceptance_delta or 0.0) != 0.0),
        key=_order,
    )
    return EvaluationDiff(
        before_id=before.id,
        after_id=after.id,
        compared=len(changes),
        changed=len(changed),
        worse=sum(c.outcome_change == "worse" for c in changes),
        better=sum(c.outcome_change == "better" for c in changes),
        only_before=sorted(old.keys() - new.keys()),
        only_after=sorted(new.keys() - old.keys()),
        cases=changed[:limit],
    )
