"""/admin/v1/decisions: listing with filters and cursor pagination, and records."""

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse

from control.api.auth import Reader
from control.api.deps import SessionDep
from control.api.errors import error_responses
from control.api.ids import MAX_ID, IdPath
from control.api.pagination import Cursor, Limit, Page, page_of
from control.decisions import repository as repo
from control.decisions.schemas import Decision
from control.domain import Missing
from control.models import Decision as DecisionRow

router = APIRouter(prefix="/decisions", tags=["decisions"])


@router.get("", response_model=Page[Decision], responses=error_responses())
def list_decisions(
    session: SessionDep,
    _: Reader,
    rollout_id: int | None = Query(default=None, ge=1, le=MAX_ID),
    kind: str | None = Query(default=None, max_length=32),
    actor: str | None = Query(default=None, max_length=200),
    task_id: str | None = Query(default=None, max_length=200),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[Decision]:
    rows = repo.DECISIONS.page(
        session,
        rollout_id=rollout_id,
        kind=kind,
        actor=actor,
        task_id=task_id,
        cursor=cursor,
        limit=limit,
        newest=True,
    )
    return page_of(rows, limit, Decision.of)


def _get(session: SessionDep, decision_id: int) -> DecisionRow:
    return repo.DECISIONS.get_or_raise(session, decision_id)


@router.get("/{decision_id}", response_model=Decision, responses=error_responses(404))
def get_decision(decision_id: IdPath, session: SessionDep, _: Reader) -> Decision:
    return Decision.of(_get(session, decision_id))


@router.get(
    "/{decision_id}/record",
    response_class=PlainTextResponse,
    responses={
        200: {"content": {"text/markdown": {}}, "description": "The decision record."},
        **error_responses(404),
    },
)
def get_decision_record(decision_id: IdPath, session: SessionDep, _: Reader) -> PlainTextResponse:
    row = _get(session, decision_id)
    if row.record_markdown is None:
        raise Missing(
            "record",
            f"decision {decision_id} has no record (every state change has one; holds do not)",
        )
    return PlainTextResponse(row.record_markdown, media_type="text/markdown; charset=utf-8")
