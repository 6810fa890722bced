"""/admin/v1/rollouts and the actions POST /admin/v1/rollouts/{id}/{action}."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import JSONResponse

from control.api.auth import Reader, Writer
from control.api.deps import SessionDep, SettingsDep
from control.api.errors import error_responses
from control.api.etag import (
    NOT_MODIFIED,
    etag,
    if_match,
    not_modified,
    required_if_match,
    required_if_match_or_any,
    set_etag,
)
from control.api.handlers import render_control_error
from control.api.idempotency import IdempotencyDep
from control.api.ids import MAX_ID, IdPath
from control.api.pagination import Cursor, Limit, Page, page_of
from control.audit.service import record_audit
from control.rollouts import repository as repo
from control.rollouts import service
from control.rollouts.blocking import BlockingCaseRegression
from control.rollouts.schemas import Rollout, RolloutActionBody, RolloutCreate, RolloutUpdate
from control.rollouts.state_machine import RolloutAction
from specwire import RolloutState

router = APIRouter(prefix="/rollouts", tags=["rollouts"])


@router.get("", response_model=Page[Rollout], responses=error_responses())
def list_rollouts(
    session: SessionDep,
    _: Reader,
    name: str | None = Query(default=None, max_length=100),
    state: RolloutState | None = Query(default=None),
    segment_id: int | None = Query(default=None, ge=1, le=MAX_ID),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[Rollout]:
    rows = repo.ROLLOUTS.page(
        session,
        name=name,
        state=state.value if state else None,
        segment_id=segment_id,
        cursor=cursor,
        limit=limit,
    )
    return page_of(rows, limit, Rollout.of)


@router.post(
    "", status_code=status.HTTP_201_CREATED, response_model=Rollout, responses=error_responses(409)
)
def create_rollout(
    body: RolloutCreate, session: SessionDep, idem: IdempotencyDep, settings: SettingsDep
) -> JSONResponse:
    """422 `target_mismatch` when the baseline pool's target weights (or adapter set)
    differ from the spec pool's, naming both digests."""
    rollout = service.create_rollout(
        session, body, actor=idem.principal.actor, model_roots=settings.resolved_model_roots()
    )
    return idem.remember(
        Rollout.of(rollout), status_code=201, headers={"ETag": etag(rollout.version)}
    )


@router.get(
    "/{rollout_id}", response_model=Rollout, responses={**NOT_MODIFIED, **error_responses(404)}
)
def get_rollout(
    rollout_id: IdPath, session: SessionDep, _: Reader, request: Request, response: Response
) -> Rollout | Response:
    rollout = service.get_rollout(session, rollout_id)
    return not_modified(request, response, rollout.version) or Rollout.of(rollout)


@router.patch("/{rollout_id}", response_model=Rollout, responses=error_responses(404, 412, 428))
def update_rollout(
    rollout_id: IdPath,
    body: RolloutUpdate,
    session: SessionDep,
    principal: Writer,
    response: Response,
    expected: Annotated[int, Depends(required_if_match)],
) -> Rollout:
    rollout = service.update_rollout(
        session, rollout_id, body, expected_version=expected, actor=principal.actor
    )
    set_etag(response, rollout.version)
    return Rollout.of(rollout)


@router.delete(
    "/{rollout_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404, 409, 412, 428),
)
def delete_rollout(
    rollout_id: IdPath,
    session: SessionDep,
    principal: Writer,
    expected: Annotated[int | None, Depends(required_if_match_or_any)],
) -> Response:
    service.delete_rollout(session, rollout_id, expected_version=expected, actor=principal.actor)
    return Response(status_code=204)


@router.post(
    "/{rollout_id}/{action}",
    response_model=Rollout,
    responses=error_responses(404, 409, 412),
    description=(
        "evaluate, start, promote, pause, resume, rollback, disable or enable. An illegal "
        "transition is 409 naming the allowed actions; a `start` without its stage's evidence "
        "(offline evaluation into shadow, the shadow's exit criterion into canary) is 409 "
        "`missing_evidence` naming it, unless the body waives it with a reason. A regression "
        "on a blocking boundary case of the segment's eval set is 409 "
        "`blocking_case_regression` naming the cases, waived or not, and audited "
        "(`rollout.start_blocked`). A stale "
        "If-Match is 412. Without If-Match the action applies to the version read, still as "
        "a compare-and-set."
    ),
)
def act_on_rollout(
    rollout_id: IdPath,
    action: RolloutAction,
    session: SessionDep,
    idem: IdempotencyDep,
    expected: Annotated[int | None, Depends(if_match)],
    body: RolloutActionBody | None = None,
) -> JSONResponse:
    # NOTE: with an Idempotency-Key a retried `promote` replays instead of promoting twice.
    try:
        rollout = service.transition_rollout(
            session,
            rollout_id,
            action,
            expected_version=expected,
            actor=idem.principal.actor,
            reason=body.reason if body else None,
            evidence=None,
            task_id=None,
            kind=None,
            waive=frozenset(body.waive) if body else frozenset(),
        )
    except BlockingCaseRegression as exc:
        # The refusal is itself a record: nothing else was written, so the request's
        # session keeps only the audit event (committed as the 409 goes out).
        session.rollback()
        record_audit(
            session,
            actor=idem.principal.actor,
            action="rollout.start_blocked",
            entity_type="rollout",
            entity_id=rollout_id,
            after=exc.details,
            reason=body.reason if body else None,
        )
        return render_control_error(exc)
    return idem.remember(
        Rollout.of(rollout), status_code=200, headers={"ETag": etag(rollout.version)}
    )
