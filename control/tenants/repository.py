"""SQL for tenants, API keys and admin tokens (reads and create through `TENANTS`,
`API_KEYS` and `ADMIN_TOKENS`)."""

from sqlalchemy.orm import Session

from control.models import AdminToken, ApiKey, Tenant
from control.repository import Repository, equal_to

TENANTS = Repository(Tenant, "tenant")
API_KEYS = Repository(ApiKey, "api_key")
ADMIN_TOKENS = Repository(AdminToken, "admin_token")


def page_tenants(
    session: Session, *, name: str | None, cursor: str | None, limit: int
) -> list[Tenant]:
    return TENANTS.page(session, *equal_to((Tenant.name, name)), cursor=cursor, limit=limit)


def page_keys(
    session: Session, tenant_id: int, *, name: str | None, cursor: str | None, limit: int
) -> list[ApiKey]:
    return API_KEYS.page(
        session,
        ApiKey.tenant_id == tenant_id,
        *equal_to((ApiKey.name, name)),
        cursor=cursor,
        limit=limit,
    )


def get_key(session: Session, tenant_id: int, key_id: int) -> ApiKey | None:
    return API_KEYS.one_or_none(session, ApiKey.tenant_id == tenant_id, ApiKey.id == key_id)


def page_admin_tokens(
    session: Session, *, name: str | None, cursor: str | None, limit: int
) -> list[AdminToken]:
    return ADMIN_TOKENS.page(
        session, *equal_to((AdminToken.name, name)), cursor=cursor, limit=limit
    )
