"""/admin/v1/pairs and /admin/v1/pairs/{id}/versions (create and retire only)."""

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Request, Response, status
from fastapi.responses import JSONResponse

from control.api.auth import Reader, Writer
from control.api.deps import SessionDep, SettingsDep
from control.api.errors import error_responses
from control.api.etag import NOT_MODIFIED, etag, not_modified, required_if_match_or_any, set_etag
from control.api.idempotency import IdempotencyDep
from control.api.ids import IdPath
from control.api.pagination import Cursor, Limit, Page, page_of
from control.pairs import repository as repo
from control.pairs import service
from control.pairs.schemas import Pair, PairCreate, PairUpdate, PairVersion, PairVersionCreate

router = APIRouter(prefix="/pairs", tags=["pairs"])


@router.get("", response_model=Page[Pair], responses=error_responses())
def list_pairs(
    session: SessionDep,
    _: Reader,
    name: str | None = Query(default=None, max_length=100),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[Pair]:
    rows = repo.PAIRS.page(session, name=name, cursor=cursor, limit=limit)
    return page_of(rows, limit, Pair.model_validate)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=Pair,
    responses=error_responses(409),
)
def create_pair(
    body: PairCreate, session: SessionDep, principal: Writer, idem: IdempotencyDep
) -> JSONResponse:
    pair = service.create_pair(session, body, actor=principal.actor)
    shown = Pair.model_validate(pair)
    return idem.remember(
        shown, status_code=201, headers={"ETag": etag(shown.version, shown.versions)}
    )


@router.get("/{pair_id}", response_model=Pair, responses={**NOT_MODIFIED, **error_responses(404)})
def get_pair(
    pair_id: IdPath, session: SessionDep, _: Reader, request: Request, response: Response
) -> Pair | Response:
    shown = Pair.model_validate(service.get_pair(session, pair_id))
    return not_modified(request, response, shown.version, shown.versions) or shown


@router.patch("/{pair_id}", response_model=Pair, responses=error_responses(404, 412, 428))
def update_pair(
    pair_id: IdPath,
    body: PairUpdate,
    session: SessionDep,
    principal: Writer,
    response: Response,
    expected: Annotated[int | None, Depends(required_if_match_or_any)],
) -> Pair:
    pair = service.update_pair(
        session, pair_id, body, actor=principal.actor, expected_version=expected
    )
    shown = Pair.model_validate(pair)
    set_etag(response, shown.version, shown.versions)
    return shown


@router.delete(
    "/{pair_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404, 409, 412, 428),
)
def delete_pair(
    pair_id: IdPath,
    session: SessionDep,
    principal: Writer,
    expected: Annotated[int | None, Depends(required_if_match_or_any)],
) -> Response:
    service.delete_pair(session, pair_id, actor=principal.actor, expected_version=expected)
    return Response(status_code=204)


@router.get("/{pair_id}/versions", response_model=Page[PairVersion], responses=error_responses(404))
def list_pair_versions(
    pair_id: IdPath,
    session: SessionDep,
    _: Reader,
    version_status: str | None = Query(
        default=None, alias="status", max_length=20, description="active or retired."
    ),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[PairVersion]:
    pair = service.get_pair(session, pair_id)
    rows = repo.PAIR_VERSIONS.page(
        session, pair_id=pair.id, status=version_status, cursor=cursor, limit=limit
    )
    return page_of(rows, limit, PairVersion.model_validate)


@router.post(
    "/{pair_id}/versions",
    status_code=status.HTTP_201_CREATED,
    response_model=PairVersion,
    responses=error_responses(404, 409),
    description=(
        "Validates the artifacts; an incompatible pair is 422 naming the mismatch, a "
        "malformed file 422 naming the file and field, and a ref outside the configured "
        "model roots 422 artifact_outside_model_roots."
    ),
)
def register_pair_version(
    pair_id: IdPath,
    body: PairVersionCreate,
    session: SessionDep,
    principal: Writer,
    idem: IdempotencyDep,
    settings: SettingsDep,
) -> JSONResponse:
    version = service.register_version(
        session,
        pair_id,
        body,
        actor=principal.actor,
        model_roots=settings.resolved_model_roots(),
    )
    return idem.remember(PairVersion.model_validate(version), status_code=201)


@router.get(
    "/{pair_id}/versions/{version_id}",
    response_model=PairVersion,
    responses=error_responses(404),
)
def get_pair_version(
    pair_id: IdPath, version_id: IdPath, session: SessionDep, _: Reader
) -> PairVersion:
    return PairVersion.model_validate(service.get_version(session, pair_id, version_id))


@router.post(
    "/{pair_id}/versions/{version_id}/suggest-depth",
    status_code=status.HTTP_201_CREATED,
    response_model=PairVersion,
    responses=error_responses(404, 409),
    description=(
        "Registers the sibling version at the depth the automation's latest advice "
        "recommends (k is fixed per vLLM engine); it goes through the same stages. 409 "
        "missing_evidence without advice, already_at_advised_depth when k already matches."
    ),
)
def suggest_depth(
    pair_id: IdPath,
    version_id: IdPath,
    session: SessionDep,
    principal: Writer,
    idem: IdempotencyDep,
    settings: SettingsDep,
) -> JSONResponse:
    from control.pairs.depth import suggest_depth as suggest

    sibling = suggest(
        session,
        pair_id,
        version_id,
        actor=principal.actor,
        model_roots=settings.resolved_model_roots(),
    )
    return idem.remember(PairVersion.model_validate(sibling), status_code=201)


@router.post(
    "/{pair_id}/versions/{version_id}/retire",
    response_model=PairVersion,
    responses=error_responses(404, 409),
)
def retire_pair_version(
    pair_id: IdPath,
    version_id: IdPath,
    session: SessionDep,
    idem: IdempotencyDep,
    reason: str | None = Body(default=None, embed=True, max_length=1000),
) -> JSONResponse:
    version = service.retire_version(
        session, pair_id, version_id, actor=idem.principal.actor, reason=reason
    )
    return idem.remember(PairVersion.model_validate(version), status_code=200)
