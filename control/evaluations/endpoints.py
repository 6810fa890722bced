"""/admin/v1/eval-sets (versioned, with lineage) and /admin/v1/evaluations (offline)."""

from fastapi import APIRouter, Query, status
from fastapi.responses import JSONResponse

from control.api.auth import Reader
from control.api.deps import SessionDep
from control.api.errors import error_responses
from control.api.idempotency import IdempotencyDep
from control.api.ids import MAX_ID, IdPath
from control.api.pagination import Cursor, Limit, Page, page_of
from control.evaluations import repository as repo
from control.evaluations import service
from control.evaluations.diff import diff_evaluations
from control.evaluations.incidents import add_case_from_request
from control.evaluations.schemas import (
    CaseFromRequest,
    CaseResult,
    EvalSet,
    EvalSetCreate,
    EvalSetSummary,
    EvaluationDiff,
    OfflineEvaluation,
    OfflineEvaluationCreate,
)

router = APIRouter(tags=["evaluations"])


@router.get("/eval-sets", response_model=Page[EvalSetSummary], responses=error_responses())
def list_eval_sets(
    session: SessionDep,
    _: Reader,
    name: str | None = Query(default=None, max_length=100),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[EvalSetSummary]:
    rows = repo.EVAL_SETS.page(session, name=name, cursor=cursor, limit=limit)
    more = len(rows) > limit
    shown = rows[:limit]
    return Page[EvalSetSummary](
        items=service.summaries(session, shown),
        next_cursor=str(shown[-1].id) if more and shown else None,
    )


@router.post(
    "/eval-sets",
    status_code=status.HTTP_201_CREATED,
    response_model=EvalSet,
    responses=error_responses(),
    description="Writes the next version of the named set (1 for a new name); sets are "
    "never edited. Cases carry prompt references and digests, never prompt text.",
)
def create_eval_set(body: EvalSetCreate, session: SessionDep, idem: IdempotencyDep) -> JSONResponse:
    row = service.create_set(session, body, actor=idem.principal.actor)
    return idem.remember(service.describe(session, row.id), status_code=201)


@router.post(
    "/eval-sets/{set_id}/cases",
    status_code=status.HTTP_201_CREATED,
    response_model=EvalSet,
    responses=error_responses(404, 409),
    description="Writes the set's next version: its cases plus one made from a request "
    "record (labels from the record's settings; the prompt reference and digest from the "
    "operator, since control holds no text). 409 `stale_eval_set` unless the set is its "
    "name's latest version, 409 `case_exists` for a key it has; 422 for an unknown request.",
)
def add_eval_case(
    set_id: IdPath, body: CaseFromRequest, session: SessionDep, idem: IdempotencyDep
) -> JSONResponse:
    row = add_case_from_request(session, set_id, body, actor=idem.principal.actor)
    return idem.remember(service.describe(session, row.id), status_code=201)


@router.get("/eval-sets/{set_id}", response_model=EvalSet, responses=error_responses(404))
def get_eval_set(set_id: IdPath, session: SessionDep, _: Reader) -> EvalSet:
    return service.describe(session, set_id)


@router.get("/evaluations", response_model=Page[OfflineEvaluation], responses=error_responses())
def list_evaluations(
    session: SessionDep,
    _: Reader,
    pair_version_id: int | None = Query(default=None, ge=1, le=MAX_ID),
    eval_set_id: int | None = Query(default=None, ge=1, le=MAX_ID),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[OfflineEvaluation]:
    """Newest first."""
    rows = repo.EVALUATIONS.page(
        session,
        pair_version_id=pair_version_id,
        eval_set_id=eval_set_id,
        cursor=cursor,
        limit=limit,
        newest=True,
    )
    return page_of(rows, limit, OfflineEvaluation.model_validate)


@router.post(
    "/evaluations",
    status_code=status.HTTP_201_CREATED,
    response_model=OfflineEvaluation,
    responses=error_responses(),
    description="An offline evaluation of a pair version on an eval set (what `specroute "
    "engine evaluate` posts). Cases past their refresh-by date are flagged on it.",
)
def create_evaluation(
    body: OfflineEvaluationCreate, session: SessionDep, idem: IdempotencyDep
) -> JSONResponse:
    row = service.create_evaluation(session, body, actor=idem.principal.actor)
    return idem.remember(OfflineEvaluation.model_validate(row), status_code=201)


@router.get(
    "/evaluations/{evaluation_id}", response_model=OfflineEvaluation, responses=error_responses(404)
)
def get_evaluation(evaluation_id: IdPath, session: SessionDep, _: Reader) -> OfflineEvaluation:
    return OfflineEvaluation.model_validate(service.get_evaluation(session, evaluation_id))


@router.get(
    "/evaluations/{evaluation_id}/cases",
    response_model=Page[CaseResult],
    responses=error_responses(404),
    description="The evaluation's per-case results in case order (none when it was posted "
    "with aggregates only): outcome, tokens, acceptance per position; never text.",
)
def list_case_results(
    evaluation_id: IdPath,
    session: SessionDep,
    _: Reader,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[CaseResult]:
    service.get_evaluation(session, evaluation_id)
    rows = repo.CASE_RESULTS.page(session, evaluation_id=evaluation_id, cursor=cursor, limit=limit)
    return page_of(rows, limit, CaseResult.model_validate)


@router.get(
    "/evaluations/{evaluation_id}/diff",
    response_model=EvaluationDiff,
    responses=error_responses(404, 409),
    description="The cases that changed most from evaluation `base` to this one, matched by "
    "case key: outcome moves first (worse before better), then the largest acceptance "
    "change. 409 `no_case_results` when either was posted without per-case results.",
)
def diff_evaluation(
    evaluation_id: IdPath,
    session: SessionDep,
    _: Reader,
    base: int = Query(ge=1, le=MAX_ID, description="The earlier evaluation's id."),
    limit: int = Query(default=20, ge=1, le=500, description="How many changed cases."),
) -> EvaluationDiff:
    return diff_evaluations(session, base, evaluation_id, limit=limit)
