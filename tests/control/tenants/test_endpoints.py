"""The tenants' routes: keys shown once and stored hashed; update and delete."""

import hashlib
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import ApiKey, AuditEvent
from control.snapshot.version import current_snapshot_version


def test_tenant_keys_are_shown_once_and_stored_hashed(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    tenant = app_client.post(
        "/admin/v1/tenants",
        json={"name": "acme", "override_allowed": True, "weighted_tokens_per_minute": 1000},
        headers=admin_headers,
    )
    assert tenant.status_code == 201
    tid = tenant.json()["id"]
    before = current_snapshot_version(session)
    created = app_client.post(
        f"/admin/v1/tenants/{tid}/keys", json={"name": "ci"}, headers=admin_headers
    )
    assert created.status_code == 201
    key: str = created.json()["key"]
    assert key.startswith("sk-sr-")
    assert len(key) > 40
    row = session.scalars(select(ApiKey).where(ApiKey.tenant_id == tid)).one()
    assert row.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert row.prefix == key[:12]
    assert current_snapshot_version(session) == before + 1
    audit = session.scalars(select(AuditEvent).where(AuditEvent.action == "api_key.create")).one()
    assert key not in str(audit.after)

    page = app_client.get(f"/admin/v1/tenants/{tid}/keys", headers=admin_headers).json()
    assert page["next_cursor"] is None
    listed = page["items"]
    assert listed == [
        {
            "id": row.id,
            "tenant_id": tid,
            "name": "ci",
            "prefix": key[:12],
            "created_at": listed[0]["created_at"],
            "revoked_at": None,
        }
    ]
    revoked = app_client.post(
        f"/admin/v1/tenants/{tid}/keys/{row.id}/revoke", headers=admin_headers
    )
    assert revoked.status_code == 200
    session.refresh(row)
    assert row.revoked_at is not None
    missing = app_client.post(f"/admin/v1/tenants/{tid}/keys/999999/revoke", headers=admin_headers)
    assert missing.status_code == 404


def test_tenant_update_and_delete(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    tid = app_client.post("/admin/v1/tenants", json={"name": "beta"}, headers=admin_headers).json()[
        "id"
    ]
    patched = app_client.patch(
        f"/admin/v1/tenants/{tid}",
        json={"allowed_models": ["tiny"], "weighted_tokens_per_minute": 50},
        headers={**admin_headers, "If-Match": '"1"'},
    )
    assert patched.status_code == 200
    body: dict[str, Any] = patched.json()
    assert (body["allowed_models"], body["weighted_tokens_per_minute"]) == (["tiny"], 50)
    cleared = app_client.patch(
        f"/admin/v1/tenants/{tid}",
        json={"clear_quota": True},
        headers={**admin_headers, "If-Match": patched.headers["ETag"]},
    )
    assert cleared.json()["weighted_tokens_per_minute"] is None
    assert cleared.json()["allowed_models"] == ["tiny"]
    deleted = app_client.delete(
        f"/admin/v1/tenants/{tid}", headers={**admin_headers, "If-Match": cleared.headers["ETag"]}
    )
    assert deleted.status_code == 204
    assert app_client.get(f"/admin/v1/tenants/{tid}", headers=admin_headers).status_code == 404
    actions = session.scalars(
        select(AuditEvent.action).where(AuditEvent.entity_type == "tenant").order_by(AuditEvent.id)
    ).all()
    assert actions == ["tenant.create", "tenant.update", "tenant.update", "tenant.delete"]
