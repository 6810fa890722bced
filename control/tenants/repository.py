"""SQL for tenants, API keys and admin tokens."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import AdminToken, ApiKey, Tenant
from control.repository import equal_to, oldest_first


def page_tenants(
    session: Session, *, name: str | None, cursor: str | None, limit: int
) -> list[Tenant]:
    query = select(Tenant).where(*equal_to((Tenant.name, name)))
    return oldest_first(session, query, Tenant.id, cursor=cursor, limit=limit)


def page_keys(
    session: Session, tenant_id: int, *, name: str | None, cursor: str | None, limit: int
) -> list[ApiKey]:
    query = select(ApiKey).where(ApiKey.tenant_id == tenant_id, *equal_to((ApiKey.name, name)))
    return oldest_first(session, query, ApiKey.id, cursor=cursor, limit=limit)


def tenant_by_name(session: Session, name: str) -> Tenant | None:
    return session.scalar(select(Tenant).where(Tenant.name == name))


def get_key(session: Session, tenant_id: int, key_id: int) -> ApiKey | None:
    return session.scalar(select(ApiKey).where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id))


def page_admin_tokens(
    session: Session, *, name: str | None, cursor: str | None, limit: int
) -> list[AdminToken]:
    query = select(AdminToken).where(*equal_to((AdminToken.name, name)))
    return oldest_first(session, query, AdminToken.id, cursor=cursor, limit=limit)


def admin_token_by_name(session: Session, name: str) -> AdminToken | None:
    return session.scalar(select(AdminToken).where(AdminToken.name == name))
