"""/admin/v1/threshold-sets: create, read, and change (= a new version)."""

from fastapi import APIRouter, Query, status
from fastapi.responses import JSONResponse

from control.api.auth import Reader
from control.api.deps import SessionDep
from control.api.errors import error_responses
from control.api.idempotency import IdempotencyDep
from control.api.ids import IdPath
from control.api.pagination import Cursor, Limit, Page, page_of
from control.thresholds import repository as repo
from control.thresholds import service
from control.thresholds.schemas import ThresholdSet, ThresholdSetChange, ThresholdSetCreate

router = APIRouter(prefix="/threshold-sets", tags=["threshold-sets"])


@router.get("", response_model=Page[ThresholdSet], responses=error_responses())
def list_threshold_sets(
    session: SessionDep,
    _: Reader,
    name: str | None = Query(default=None, max_length=100),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[ThresholdSet]:
    rows = repo.SETS.page(session, name=name, cursor=cursor, limit=limit)
    return page_of(rows, limit, ThresholdSet.model_validate)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=ThresholdSet,
    responses=error_responses(409),
)
def create_threshold_set(
    body: ThresholdSetCreate, session: SessionDep, idem: IdempotencyDep
) -> JSONResponse:
    row = service.create_set(session, body, actor=idem.principal.actor)
    return idem.remember(ThresholdSet.model_validate(row), status_code=201)


@router.get("/{set_id}", response_model=ThresholdSet, responses=error_responses(404))
def get_threshold_set(set_id: IdPath, session: SessionDep, _: Reader) -> ThresholdSet:
    return ThresholdSet.model_validate(service.get_set(session, set_id))


@router.post(
    "/{set_id}/versions",
    status_code=status.HTTP_201_CREATED,
    response_model=ThresholdSet,
    responses=error_responses(404),
    description="A change never edits a set: it creates the next version of the same name.",
)
def change_threshold_set(
    set_id: IdPath, body: ThresholdSetChange, session: SessionDep, idem: IdempotencyDep
) -> JSONResponse:
    row = service.change_set(session, set_id, body, actor=idem.principal.actor)
    return idem.remember(ThresholdSet.model_validate(row), status_code=201)
