"""/admin/v1/pools."""

from fastapi import APIRouter, Response, status
from fastapi.responses import JSONResponse

from control.api.auth import Reader, Writer
from control.api.deps import SessionDep, SettingsDep
from control.api.errors import error_responses
from control.api.idempotency import IdempotencyDep
from control.api.ids import IdPath
from control.pools import repository as repo
from control.pools import service
from control.pools.schemas import Pool, PoolCreate, PoolUpdate
from control.tenants import service as tenant_service
from control.tenants.schemas import AdminToken, AdminTokenCreated, AgentTokenCreate

router = APIRouter(prefix="/pools", tags=["pools"])


@router.get("", response_model=list[Pool], responses=error_responses())
def list_pools(session: SessionDep, _: Reader) -> list[Pool]:
    return [Pool.model_validate(p) for p in repo.list_pools(session)]


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
    return idem.remember(Pool.model_validate(pool), status_code=201)


@router.get("/{pool_id}", response_model=Pool, responses=error_responses(404))
def get_pool(pool_id: IdPath, session: SessionDep, _: Reader) -> Pool:
    return Pool.model_validate(service.get_pool(session, pool_id))


@router.patch("/{pool_id}", response_model=Pool, responses=error_responses(404))
def update_pool(
    pool_id: IdPath,
    body: PoolUpdate,
    session: SessionDep,
    principal: Writer,
    settings: SettingsDep,
) -> Pool:
    """422 `target_mismatch` when the change would leave a rollout's arms serving
    different adapter sets."""
    pool = service.update_pool(
        session,
        pool_id,
        body,
        actor=principal.actor,
        model_roots=settings.resolved_model_roots(),
    )
    return Pool.model_validate(pool)


@router.delete(
    "/{pool_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404, 409)
)
def delete_pool(pool_id: IdPath, session: SessionDep, principal: Writer) -> Response:
    service.delete_pool(session, pool_id, actor=principal.actor)
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
