"""/admin/v1/pairs and /admin/v1/pairs/{id}/versions (create and retire only)."""

from fastapi import APIRouter, Body, Response, status
from fastapi.responses import JSONResponse

from control.api.auth import Reader, Writer
from control.api.deps import SessionDep, SettingsDep
from control.api.errors import error_responses
from control.api.idempotency import IdempotencyDep
from control.api.ids import IdPath
from control.pairs import repository as repo
from control.pairs import service
from control.pairs.schemas import Pair, PairCreate, PairUpdate, PairVersion, PairVersionCreate

router = APIRouter(prefix="/pairs", tags=["pairs"])


@router.get("", response_model=list[Pair], responses=error_responses())
def list_pairs(session: SessionDep, _: Reader) -> list[Pair]:
    return [Pair.model_validate(p) for p in repo.list_pairs(session)]


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
    return idem.remember(Pair.model_validate(pair), status_code=201)


@router.get("/{pair_id}", response_model=Pair, responses=error_responses(404))
def get_pair(pair_id: IdPath, session: SessionDep, _: Reader) -> Pair:
    return Pair.model_validate(service.get_pair(session, pair_id))


@router.patch("/{pair_id}", response_model=Pair, responses=error_responses(404))
def update_pair(pair_id: IdPath, body: PairUpdate, session: SessionDep, principal: Writer) -> Pair:
    return Pair.model_validate(service.update_pair(session, pair_id, body, actor=principal.actor))


@router.delete(
    "/{pair_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404, 409)
)
def delete_pair(pair_id: IdPath, session: SessionDep, principal: Writer) -> Response:
    service.delete_pair(session, pair_id, actor=principal.actor)
    return Response(status_code=204)


@router.get("/{pair_id}/versions", response_model=list[PairVersion], responses=error_responses(404))
def list_versions(pair_id: IdPath, session: SessionDep, _: Reader) -> list[PairVersion]:
    return [PairVersion.model_validate(v) for v in service.get_pair(session, pair_id).versions]


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
def register_version(
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
def get_version(pair_id: IdPath, version_id: IdPath, session: SessionDep, _: Reader) -> PairVersion:
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
def retire_version(
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
