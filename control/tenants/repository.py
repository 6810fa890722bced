"""SQL for tenants, API keys and admin tokens."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import AdminToken, ApiKey, Tenant


def list_tenants(session: Session) -> list[Tenant]:
    return list(session.scalars(select(Tenant).order_by(Tenant.id)))


def tenant_by_name(session: Session, name: str) -> Tenant | None:
    return session.scalar(select(Tenant).where(Tenant.name == name))


def get_key(session: Session, tenant_id: int, key_id: int) -> ApiKey | None:
    return session.scalar(select(ApiKey).where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id))


def list_admin_tokens(session: Session) -> list[AdminToken]:
    return list(session.scalars(select(AdminToken).order_by(AdminToken.id)))


def admin_token_by_name(session: Session, name: str) -> AdminToken | None:
    return session.scalar(select(AdminToken).where(AdminToken.name == name))
