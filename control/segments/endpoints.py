"""/admin/v1/segments, with ETag on reads and If-Match on updates."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import JSONResponse

from control.api.auth import Reader, Writer
from control.api.deps import SessionDep
from control.api.errors import error_responses
from control.api.etag import (
    NOT_MODIFIED,
    etag,
    not_modified,
    required_if_match,
    required_if_match_or_any,
    set_etag,
)
from control.api.idempotency import IdempotencyDep
from control.api.ids import IdPath
from control.api.pagination import Cursor, Limit, Page, page_of
from control.segments import repository as repo
from control.segments import service
from control.segments.schemas import Segment, SegmentCreate, SegmentUpdate

router = APIRouter(prefix="/segments", tags=["segments"])


@router.get("", response_model=Page[Segment], responses=error_responses())
def list_segments(
    session: SessionDep,
    _: Reader,
    name: str | None = Query(default=None, max_length=100),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[Segment]:
    """In id order; the router matches them by priority (highest first)."""
    rows = repo.SEGMENTS.page(session, name=name, cursor=cursor, limit=limit)
    return page_of(rows, limit, Segment.model_validate)


@router.post(
    "", status_code=status.HTTP_201_CREATED, response_model=Segment, responses=error_responses(409)
)
def create_segment(
    body: SegmentCreate, session: SessionDep, principal: Writer, idem: IdempotencyDep
) -> JSONResponse:
    segment = service.create_segment(session, body, actor=principal.actor)
    return idem.remember(
        Segment.model_validate(segment), status_code=201, headers={"ETag": etag(segment.version)}
    )


@router.get(
    "/{segment_id}", response_model=Segment, responses={**NOT_MODIFIED, **error_responses(404)}
)
def get_segment(
    segment_id: IdPath, session: SessionDep, _: Reader, request: Request, response: Response
) -> Segment | Response:
    segment = service.get_segment(session, segment_id)
    return not_modified(request, response, segment.version) or Segment.model_validate(segment)


@router.patch(
    "/{segment_id}", response_model=Segment, responses=error_responses(404, 409, 412, 428)
)
def update_segment(
    segment_id: IdPath,
    body: SegmentUpdate,
    session: SessionDep,
    principal: Writer,
    response: Response,
    expected: Annotated[int, Depends(required_if_match)],
) -> Segment:
    segment = service.update_segment(
        session, segment_id, body, expected_version=expected, actor=principal.actor
    )
    set_etag(response, segment.version)
    return Segment.model_validate(segment)


@router.delete(
    "/{segment_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404, 409, 412, 428),
)
def delete_segment(
    segment_id: IdPath,
    session: SessionDep,
    principal: Writer,
    expected: Annotated[int | None, Depends(required_if_match_or_any)],
) -> Response:
    service.delete_segment(session, segment_id, expected_version=expected, actor=principal.actor)
    return Response(status_code=204)
