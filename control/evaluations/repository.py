"""SQL for eval sets, their cases and offline evaluations (reads through
`EVAL_SETS`, `EVALUATIONS` and `CASE_RESULTS`)."""

from datetime import date
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.models import (
    DepthRecommendation,
    EvalCase,
    EvalSet,
    EvaluationCaseResult,
    OfflineEvaluation,
    Rollout,
)
from control.repository import Repository

EVAL_SETS = Repository(EvalSet, "eval_set")
EVALUATIONS = Repository(OfflineEvaluation, "evaluation", label="offline evaluation")
CASE_RESULTS = Repository(EvaluationCaseResult, "case_result")


def latest_version(session: Session, name: str) -> int:
    return int(session.scalar(select(func.max(EvalSet.version)).where(EvalSet.name == name)) or 0)


def latest_set(session: Session, name: str) -> EvalSet | None:
    return session.scalar(
        select(EvalSet).where(EvalSet.name == name).order_by(EvalSet.version.desc()).limit(1)
    )


def case_counts(session: Session) -> dict[int, int]:
    rows = session.execute(
        select(EvalCase.eval_set_id, func.count()).group_by(EvalCase.eval_set_id)
    ).all()
    return {int(set_id): int(n) for set_id, n in rows}


def stale_keys(session: Session, set_ids: list[int], today: date) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {i: [] for i in set_ids}
    rows = session.execute(
        select(EvalCase.eval_set_id, EvalCase.case_key)
        .where(EvalCase.eval_set_id.in_(set_ids), EvalCase.refresh_by < today)
        .order_by(EvalCase.id)
    ).all()
    for set_id, key in rows:
        out[int(set_id)].append(str(key))
    return out


def case_keys(session: Session, set_id: int) -> set[str]:
    return set(session.scalars(select(EvalCase.case_key).where(EvalCase.eval_set_id == set_id)))


def latest_evaluation(
    session: Session, pair_version_id: int, eval_set_id: int
) -> OfflineEvaluation | None:
    return session.scalar(
        select(OfflineEvaluation)
        .where(
            OfflineEvaluation.pair_version_id == pair_version_id,
            OfflineEvaluation.eval_set_id == eval_set_id,
        )
        .order_by(OfflineEvaluation.id.desc())
        .limit(1)
    )


def measured_cost_ratio(session: Session, spec_pool_id: int) -> tuple[float, int] | None:
    """The cost ratio the automation last measured on this spec pool (depth advice backs
    it out of the load-matched speedup), with the recommendation's id."""
    row = session.scalar(
        select(DepthRecommendation)
        .join(Rollout, Rollout.id == DepthRecommendation.rollout_id)
        .where(Rollout.spec_pool_id == spec_pool_id)
        .order_by(DepthRecommendation.id.desc())
        .limit(1)
    )
    if row is None:
        return None
    advice: Any = row.evidence.get("advice") or {}
    ratio = advice.get("cost_ratio")
    return (float(ratio), row.id) if isinstance(ratio, int | float) else None


def case_results(session: Session, evaluation_id: int) -> dict[str, EvaluationCaseResult]:
    """case key -> its result in the evaluation."""
    rows = session.scalars(
        select(EvaluationCaseResult).where(EvaluationCaseResult.evaluation_id == evaluation_id)
    )
    return {row.case_key: row for row in rows}


def boundaries(session: Session, set_id: int) -> dict[str, str]:
    """case key -> boundary, for the set's blocking cases."""
    rows = session.execute(
        select(EvalCase.case_key, EvalCase.boundary).where(
            EvalCase.eval_set_id == set_id, EvalCase.blocking.is_(True)
        )
    ).all()
    return {str(key): str(boundary) for key, boundary in rows}
