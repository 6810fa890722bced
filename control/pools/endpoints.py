"""/admin/v1/pools."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import JSONResponse

from control.api.auth import Reader, Writer
from control.api.deps import SessionDep, SettingsDep
from control.api.errors import error_responses
from control.api.etag import NOT_MODIFIED, etag, not_modified, required_if_match_or_any, set_etag
from control.api.idempotency import IdempotencyDep
from control.api.ids import IdPath
from control.api.pagination import Cursor, Limit, Page, page_of
from control.pools import repository as repo
from control.pools import service
from control.pools.schemas import Pool, PoolCreate, PoolUpdate
from control.tenants import service as tenant_service
from control.tenants.schemas import AdminToken, AdminTokenCreated, AgentTokenCreate

router = APIRouter(prefix="/pools", tags=["pools"])


@router.get("", response_model=Page[Pool], responses=error_responses())
def list_pools(
    session: SessionDep,
    _: Reader,
    name: str | None = Query(default=None, max_length=100),
    served_model_name: str | None = Query(default=None, max_length=200),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[Pool]:
    rows = repo.POOLS.page(
        session, name=name, served_model_name=served_model_name, cursor=cursor, limit=limit
    )
    return page_of(rows, limit, Pool.model_validate)


@router.post(
    "", status_code=status.HTTP_201_CREATED, response_model=Pool, responses=error_responses(409)
)
def create_pool(
    body: PoolCreate,
    session: SessionDep,
    principal: Writer,
    idem: IdempotencyDep,
    settings: SettingsDep,
) -> JSONResponse:
    """422 naming the flag (`details.flag`) when `engine_args` set a flag outside the
    allow-list of docs/engine-args.md: `engine_arg_reserved`, `engine_arg_not_allowed`,
    `engine_arg_invalid` or `engine_arg_outside_model_roots`."""
    pool = service.create_pool(
        session, body, actor=principal.actor, model_roots=settings.resolved_model_roots()
    )
    shown = Pool.model_validate(pool)
    return idem.remember(
        shown, status_code=201, headers={"ETag": etag(pool.version, shown.workers)}
    )


@router.get("/{pool_id}", response_model=Pool, responses={**NOT_MODIFIED, **error_responses(404)})
def get_pool(
    pool_id: IdPath, session: SessionDep, _: Reader, request: Request, response: Response
) -> Pool | Response:
    shown = Pool.model_validate(service.get_pool(session, pool_id))
    return not_modified(request, response, shown.version, shown.workers) or shown


@router.patch("/{pool_id}", response_model=Pool, responses=error_responses(404, 412, 428))
def update_pool(
    pool_id: IdPath,
    body: PoolUpdate,
    session: SessionDep,
    principal: Writer,
    settings: SettingsDep,
    response: Response,
    expected: Annotated[int | None, Depends(required_if_match_or_any)],
) -> Pool:
    """422 `target_mismatch` when the change would leave a rollout's arms serving
    different adapter sets."""
    pool = service.update_pool(
        session,
        pool_id,
        body,
        actor=principal.actor,
        model_roots=settings.resolved_model_roots(),
        expected_version=expected,
    )
    shown = Pool.model_validate(pool)
    set_etag(response, shown.version, shown.workers)
    return shown


@router.delete(
    "/{pool_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404, 409, 412, 428),
)
def delete_pool(
    pool_id: IdPath,
    session: SessionDep,
    principal: Writer,
    expected: Annotated[int | None, Depends(required_if_match_or_any)],
) -> Response:
    service.delete_pool(session, pool_id, actor=principal.actor, expected_version=expected)
    return Response(status_code=204)


@router.post(
    "/{pool_id}/agent-tokens",
    status_code=status.HTTP_201_CREATED,
    response_model=AdminTokenCreated,
    responses=error_responses(403, 404, 409),
    description=(
        "Enrol an engine agent for this pool. The token (in this response only) may "
        "heartbeat only for this pool, for workers at the allowed origins, and read only "
        "this pool's spec; it cannot read the snapshot or write telemetry. Revoke it with "
        "POST /admin-tokens/{id}/revoke."
    ),
)
def create_agent_token(
    pool_id: IdPath, body: AgentTokenCreate, session: SessionDep, idem: IdempotencyDep
) -> JSONResponse:
    token, secret = tenant_service.create_agent_token(
        session, pool_id, body, principal=idem.principal
    )
    created = AdminTokenCreated(**AdminToken.model_validate(token).model_dump(), token=secret)
    return idem.remember(created, status_code=201, redact=frozenset({"token"}))
