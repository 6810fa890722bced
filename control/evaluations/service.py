"""Eval sets are never edited: a change is version n+1 of the same name, so an
evaluation cites exactly the cases it ran. Offline evaluations are immutable
results posted by `specroute engine evaluate`; cases past their refresh-by date
are flagged on the evaluation when it is posted."""

from sqlalchemy.orm import Session

from control import clock
from control.audit.service import record_audit
from control.errors import InvalidRequest
from control.evaluations import repository as repo
from control.evaluations.schemas import (
    CaseOutcome,
    EvalSetCreate,
    EvalSetSummary,
    OfflineEvaluationCreate,
)
from control.evaluations.schemas import (
    EvalCase as EvalCaseOut,
)
from control.evaluations.schemas import (
    EvalSet as EvalSetOut,
)
from control.models import (
    EvalCase,
    EvalSet,
    EvaluationCaseResult,
    OfflineEvaluation,
    PairVersion,
)
from control.repository import get_row


def get_set(session: Session, set_id: int) -> EvalSet:
    return repo.EVAL_SETS.get_or_raise(session, set_id)


def create_set(session: Session, body: EvalSetCreate, *, actor: str) -> EvalSet:
    row = EvalSet(
        name=body.name,
        version=repo.latest_version(session, body.name) + 1,
        description=body.description,
        prompt_store=body.prompt_store,
        created_by=actor,
        cases=[EvalCase(**c.model_dump(mode="python")) for c in body.cases],
    )
    for case in row.cases:
        case.source = str(case.source)
        case.boundary = None if case.boundary is None else str(case.boundary)
    session.add(row)
    session.flush()
    record_audit(
        session,
        actor=actor,
        action="eval_set.version",
        entity_type="eval_set",
        entity_id=row.id,
        after={"name": row.name, "version": row.version, "cases": len(row.cases)},
    )
    return row


def summaries(session: Session, rows: list[EvalSet]) -> list[EvalSetSummary]:
    """Each set with its case count and the keys of cases past their refresh date."""
    counts = repo.case_counts(session)
    stale = repo.stale_keys(session, [r.id for r in rows], clock.now().date())
    out = []
    for row in rows:
        summary = EvalSetSummary.model_validate(row)
        summary.case_count = counts.get(row.id, 0)
        summary.stale_case_keys = stale[row.id]
        out.append(summary)
    return out


def describe(session: Session, set_id: int) -> EvalSetOut:
    row = get_set(session, set_id)
    today = clock.now().date()
    cases = [EvalCaseOut.model_validate(c) for c in row.cases]
    for case in cases:
        case.stale = case.refresh_by < today
    out = EvalSetOut.model_validate({**EvalSetSummary.model_validate(row).model_dump()})
    out.cases = cases
    out.case_count = len(cases)
    out.stale_case_keys = [c.case_key for c in cases if c.stale]
    return out


def create_evaluation(
    session: Session, body: OfflineEvaluationCreate, *, actor: str
) -> OfflineEvaluation:
    version = get_row(session, PairVersion, body.pair_version_id)
    if version is None:
        raise InvalidRequest(
            f"pair_version_id {body.pair_version_id} does not exist",
            details={"param": "pair_version_id"},
        )
    eval_set = get_row(session, EvalSet, body.eval_set_id)
    if eval_set is None:
        raise InvalidRequest(
            f"eval_set_id {body.eval_set_id} does not exist", details={"param": "eval_set_id"}
        )
    known = repo.case_keys(session, eval_set.id)
    unknown = sorted(set(body.case_keys) - known)
    if unknown:
        raise InvalidRequest(
            f"{len(unknown)} case keys are not in eval set {eval_set.name} "
            f"v{eval_set.version}: {', '.join(unknown[:5])}",
            details={"param": "case_keys", "unknown": unknown[:50]},
        )
    if len(body.position_acceptance) != version.num_speculative_tokens:
        raise InvalidRequest(
            f"pair version {version.id} drafts {version.num_speculative_tokens} tokens; "
            f"position_acceptance has {len(body.position_acceptance)} positions",
            details={"param": "position_acceptance"},
        )
    results = case_result_rows(body, version.num_speculative_tokens)
    today = clock.now().date()
    ran = set(body.case_keys)
    stale = [c.case_key for c in eval_set.cases if c.case_key in ran and c.refresh_by < today]
    # NOTE: a case the engine failed (`error`) was run but measured nothing: it counts
    # neither in the aggregates nor towards the offline gate's minimum of cases.
    failed = {r.case_key for r in body.case_results if r.outcome is CaseOutcome.ERROR}
    row = OfflineEvaluation(
        pair_version_id=version.id,
        eval_set_id=eval_set.id,
        cases=len(ran - failed),
        drafts=body.drafts,
        position_acceptance=body.position_acceptance,
        mean_acceptance_length=body.mean_acceptance_length,
        cost_ratio=body.cost_ratio,
        expected_speedup=body.expected_speedup,
        draft_perplexity=body.draft_perplexity,
        slices={k: v.model_dump() for k, v in body.slices.items()},
        stale_case_keys=stale,
        training_set=body.training_set,
        engine_version=body.engine_version,
        acceptance_source=body.acceptance_source.value,
        case_result_count=len(results),
        actor=actor,
    )
    session.add(row)
    session.flush()
    for result in results:
        result.evaluation_id = row.id
    session.add_all(results)
    session.flush()
    record_audit(
        session,
        actor=actor,
        action="offline_evaluation.create",
        entity_type="pair_version",
        entity_id=version.id,
        after={
            "evaluation_id": row.id,
            "eval_set": f"{eval_set.name} v{eval_set.version}",
            "mean_acceptance_length": row.mean_acceptance_length,
            "stale_cases": len(stale),
            "case_results": len(results),
        },
    )
    return row


def get_evaluation(session: Session, evaluation_id: int) -> OfflineEvaluation:
    return repo.EVALUATIONS.get_or_raise(session, evaluation_id)


def case_result_rows(body: OfflineEvaluationCreate, k: int) -> list[EvaluationCaseResult]:
    """The per-case rows (not yet added), checked against the evaluation: each names
    a case it ran and has one count per draft position."""
    ran = set(body.case_keys)
    unknown = sorted(r.case_key for r in body.case_results if r.case_key not in ran)
    if unknown:
        raise InvalidRequest(
            f"{len(unknown)} case results name cases not in case_keys: {', '.join(unknown[:5])}",
            details={"param": "case_results", "unknown": unknown[:50]},
        )
    wrong = [
        r.case_key
        for r in body.case_results
        if r.accepted_per_position is not None and len(r.accepted_per_position) != k
    ]
    if wrong:
        raise InvalidRequest(
            f"the pair version drafts {k} tokens; case results of {', '.join(wrong[:5])} "
            f"do not have {k} accepted_per_position counts",
            details={"param": "case_results", "cases": wrong[:50]},
        )
    return [
        EvaluationCaseResult(
            case_key=r.case_key,
            outcome=r.outcome.value,
            completion_tokens=r.completion_tokens,
            drafts=r.drafts,
            accepted_per_position=r.accepted_per_position,
            acceptance_rate=_acceptance_rate(r.drafts, r.accepted_per_position, k),
        )
        for r in body.case_results
    ]


def _acceptance_rate(drafts: int | None, accepted: list[int] | None, k: int) -> float | None:
    """Accepted / drafted tokens; None when the case took no step or was not measured."""
    if not drafts or accepted is None:
        return None
    return sum(accepted) / (drafts * k)
