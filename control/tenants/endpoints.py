"""/admin/v1/tenants, /admin/v1/tenants/{id}/keys and /admin/v1/admin-tokens."""

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import JSONResponse

from control.api.auth import Reader, Writer
from control.api.deps import SessionDep
from control.api.errors import error_responses
from control.api.etag import NOT_MODIFIED, etag, not_modified, required_if_match_or_any, set_etag
from control.api.idempotency import IdempotencyDep
from control.api.ids import IdPath
from control.api.pagination import Cursor, Limit, Page, page_of
from control.tenants import repository as repo
from control.tenants import service
from control.tenants.schemas import (
    AdminToken,
    AdminTokenCreate,
    AdminTokenCreated,
    ApiKey,
    ApiKeyCreate,
    ApiKeyCreated,
    Tenant,
    TenantCreate,
    TenantUpdate,
)

router = APIRouter(tags=["tenants"])


@router.get("/tenants", response_model=Page[Tenant], responses=error_responses())
def list_tenants(
    session: SessionDep,
    _: Reader,
    name: str | None = Query(default=None, max_length=100),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[Tenant]:
    rows = repo.TENANTS.page(session, name=name, cursor=cursor, limit=limit)
    return page_of(rows, limit, Tenant.model_validate)


@router.post(
    "/tenants",
    status_code=status.HTTP_201_CREATED,
    response_model=Tenant,
    responses=error_responses(409),
)
def create_tenant(body: TenantCreate, session: SessionDep, idem: IdempotencyDep) -> JSONResponse:
    tenant = service.create_tenant(session, body, actor=idem.principal.actor)
    return idem.remember(
        Tenant.model_validate(tenant), status_code=201, headers={"ETag": etag(tenant.version)}
    )


@router.get(
    "/tenants/{tenant_id}",
    response_model=Tenant,
    responses={**NOT_MODIFIED, **error_responses(404)},
)
def get_tenant(
    tenant_id: IdPath, session: SessionDep, _: Reader, request: Request, response: Response
) -> Tenant | Response:
    tenant = service.get_tenant(session, tenant_id)
    return not_modified(request, response, tenant.version) or Tenant.model_validate(tenant)


@router.patch(
    "/tenants/{tenant_id}", response_model=Tenant, responses=error_responses(404, 412, 428)
)
def update_tenant(
    tenant_id: IdPath,
    body: TenantUpdate,
    session: SessionDep,
    principal: Writer,
    response: Response,
    expected: Annotated[int | None, Depends(required_if_match_or_any)],
) -> Tenant:
    tenant = service.update_tenant(
        session, tenant_id, body, actor=principal.actor, expected_version=expected
    )
    set_etag(response, tenant.version)
    return Tenant.model_validate(tenant)


@router.delete(
    "/tenants/{tenant_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404, 412, 428),
)
def delete_tenant(
    tenant_id: IdPath,
    session: SessionDep,
    principal: Writer,
    expected: Annotated[int | None, Depends(required_if_match_or_any)],
) -> Response:
    service.delete_tenant(session, tenant_id, actor=principal.actor, expected_version=expected)
    return Response(status_code=204)


@router.get(
    "/tenants/{tenant_id}/keys", response_model=Page[ApiKey], responses=error_responses(404)
)
def list_api_keys(
    tenant_id: IdPath,
    session: SessionDep,
    _: Reader,
    name: str | None = Query(default=None, max_length=100),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[ApiKey]:
    tenant = service.get_tenant(session, tenant_id)
    rows = repo.API_KEYS.page(session, tenant_id=tenant.id, name=name, cursor=cursor, limit=limit)
    return page_of(rows, limit, ApiKey.model_validate)


@router.get(
    "/tenants/{tenant_id}/keys/{key_id}", response_model=ApiKey, responses=error_responses(404)
)
def get_api_key(tenant_id: IdPath, key_id: IdPath, session: SessionDep, _: Reader) -> ApiKey:
    """One key (its prefix, never the secret)."""
    return ApiKey.model_validate(service.get_key(session, tenant_id, key_id))


@router.post(
    "/tenants/{tenant_id}/keys",
    status_code=status.HTTP_201_CREATED,
    response_model=ApiKeyCreated,
    responses=error_responses(404),
    description="The key is in this response only; store it now.",
)
def create_api_key(
    tenant_id: IdPath, body: ApiKeyCreate, session: SessionDep, idem: IdempotencyDep
) -> JSONResponse:
    key, secret = service.create_key(session, tenant_id, body.name, actor=idem.principal.actor)
    created = ApiKeyCreated(**ApiKey.model_validate(key).model_dump(), key=secret)
    return idem.remember(created, status_code=201, redact=frozenset({"key"}))


@router.post(
    "/tenants/{tenant_id}/keys/{key_id}/revoke",
    response_model=ApiKey,
    responses=error_responses(404),
)
def revoke_api_key(
    tenant_id: IdPath, key_id: IdPath, session: SessionDep, idem: IdempotencyDep
) -> JSONResponse:
    key = service.revoke_key(session, tenant_id, key_id, actor=idem.principal.actor)
    return idem.remember(ApiKey.model_validate(key), status_code=200)


@router.get("/admin-tokens", response_model=Page[AdminToken], responses=error_responses())
def list_admin_tokens(
    session: SessionDep,
    _: Reader,
    name: str | None = Query(default=None, max_length=100),
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[AdminToken]:
    rows = repo.ADMIN_TOKENS.page(session, name=name, cursor=cursor, limit=limit)
    return page_of(rows, limit, AdminToken.model_validate)


@router.get("/admin-tokens/{token_id}", response_model=AdminToken, responses=error_responses(404))
def get_admin_token(token_id: IdPath, session: SessionDep, _: Reader) -> AdminToken:
    """One token (its prefix and scopes, never the secret)."""
    return AdminToken.model_validate(service.get_admin_token(session, token_id))


@router.post(
    "/admin-tokens",
    status_code=status.HTTP_201_CREATED,
    response_model=AdminTokenCreated,
    responses=error_responses(403, 409),
    description=(
        "The token is in this response only; store it now. A caller can grant only "
        "scopes it holds (403 scope_escalation otherwise)."
    ),
)
def create_admin_token(
    body: AdminTokenCreate, session: SessionDep, idem: IdempotencyDep
) -> JSONResponse:
    token, secret = service.create_admin_token(session, body, principal=idem.principal)
    created = AdminTokenCreated(**AdminToken.model_validate(token).model_dump(), token=secret)
    return idem.remember(created, status_code=201, redact=frozenset({"token"}))


@router.post(
    "/admin-tokens/{token_id}/revoke",
    response_model=AdminToken,
    responses=error_responses(403, 404),
    description=(
        "A caller can revoke only tokens whose scopes it holds. A caller that does not "
        "hold every scope gets the same 403 scope_escalation for a token it may not "
        "revoke as for a missing id (404 only for a caller holding every scope)."
    ),
)
def revoke_admin_token(token_id: IdPath, session: SessionDep, idem: IdempotencyDep) -> JSONResponse:
    token = service.revoke_admin_token(session, token_id, principal=idem.principal)
    return idem.remember(AdminToken.model_validate(token), status_code=200)
