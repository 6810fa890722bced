"""SQL for tenants, API keys and admin tokens (reads and create through `TENANTS`,
`API_KEYS` and `ADMIN_TOKENS`)."""

from sqlalchemy.orm import Session

from control.models import AdminToken, ApiKey, Tenant
from control.repository import Repository

TENANTS = Repository(Tenant, "tenant")
API_KEYS = Repository(ApiKey, "api_key")
ADMIN_TOKENS = Repository(AdminToken, "admin_token")


def get_key(session: Session, tenant_id: int, key_id: int) -> ApiKey | None:
    return API_KEYS.one_or_none(session, ApiKey.tenant_id == tenant_id, ApiKey.id == key_id)
