"""Admin auth: 401 without or with a bad token, 403 without the scope."""

import base64

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.credentials import hash_secret
from control.models import AdminToken, AuditEvent, Pair


def _token(client: TestClient, headers: dict[str, str], name: str, scopes: list[str]) -> str:
    response = client.post(
        "/admin/v1/admin-tokens", json={"name": name, "scopes": scopes}, headers=headers
    )
    assert response.status_code == 201, response.text
    token: str = response.json()["token"]
    return token


def test_missing_and_invalid_tokens_are_401(app_client: TestClient) -> None:
    missing = app_client.get("/admin/v1/pairs")
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert missing.json()["error"] == {
        "message": "missing bearer token",
        "type": "authentication_error",
        "code": "missing_token",
        "param": None,
        "details": {},
        "field_errors": None,
    }
    wrong = app_client.get("/admin/v1/pairs", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_token"
    basic = app_client.get("/admin/v1/pairs", headers={"Authorization": "Basic abc"})
    assert basic.status_code == 401


def test_read_only_token_reads_but_cannot_write(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    token = _token(app_client, admin_headers, "viewer", ["admin:read"])
    assert token.startswith("sr-admin-")
    row = session.scalars(select(AdminToken).where(AdminToken.name == "viewer")).one()
    assert row.token_hash == hash_secret(token)
    assert row.prefix == token[:12]
    assert row.scopes == ["admin:read"]

    viewer = {"Authorization": f"Bearer {token}"}
    assert app_client.get("/admin/v1/pairs", headers=viewer).status_code == 200
    denied = app_client.post("/admin/v1/pairs", json={"name": "x"}, headers=viewer)
    assert denied.status_code == 403
    assert denied.json()["error"]["type"] == "permission_error"
    assert denied.json()["error"]["details"]["required_scope"] == "admin:write"
    assert session.scalars(select(Pair)).all() == []


def test_write_only_token_cannot_read_and_revoked_token_is_401(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    token = _token(app_client, admin_headers, "writer", ["admin:write"])
    writer = {"Authorization": f"Bearer {token}"}
    assert app_client.get("/admin/v1/pairs", headers=writer).status_code == 403
    created = app_client.post("/admin/v1/pairs", json={"name": "by-writer"}, headers=writer)
    assert created.status_code == 201
    audit = session.scalars(select(AuditEvent).where(AuditEvent.action == "pair.create")).one()
    assert audit.actor == "admin:writer"

    token_id = session.scalars(select(AdminToken.id).where(AdminToken.name == "writer")).one()
    revoked = app_client.post(f"/admin/v1/admin-tokens/{token_id}/revoke", headers=admin_headers)
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    after = app_client.post("/admin/v1/pairs", json={"name": "late"}, headers=writer)
    assert after.status_code == 401
    listed = app_client.get("/admin/v1/admin-tokens", headers=admin_headers).json()["items"]
    assert [t["name"] for t in listed] == ["writer"]
    assert "token" not in listed[0]


def test_a_token_cannot_mint_or_revoke_scopes_it_does_not_hold(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    writer = {"Authorization": f"Bearer {_token(app_client, admin_headers, 'w', ['admin:write'])}"}
    escalate = app_client.post(
        "/admin/v1/admin-tokens",
        json={"name": "both", "scopes": ["admin:read", "admin:write"]},
        headers=writer,
    )
    assert escalate.status_code == 403
    assert escalate.json()["error"]["code"] == "scope_escalation"
    assert escalate.json()["error"]["details"]["missing_scopes"] == ["admin:read"]
    assert session.scalars(select(AdminToken.name).order_by(AdminToken.name)).all() == ["w"]

    # Minting what it holds is allowed; the new token has exactly those scopes.
    same = app_client.post(
        "/admin/v1/admin-tokens", json={"name": "w2", "scopes": ["admin:write"]}, headers=writer
    )
    assert same.status_code == 201 and same.json()["scopes"] == ["admin:write"]

    # Nor can it revoke a token stronger than itself (the bootstrap token can).
    _token(app_client, admin_headers, "rw", ["admin:read", "admin:write"])
    rw_id = session.scalars(select(AdminToken.id).where(AdminToken.name == "rw")).one()
    denied = app_client.post(f"/admin/v1/admin-tokens/{rw_id}/revoke", headers=writer)
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "scope_escalation"
    assert session.get(AdminToken, rw_id) is not None
    session.expire_all()
    assert session.get(AdminToken, rw_id).revoked_at is None  # type: ignore[union-attr]
    assert app_client.post(f"/admin/v1/admin-tokens/{rw_id}/revoke", headers=admin_headers).json()[
        "revoked_at"
    ]


def test_generated_secrets_carry_256_random_bits(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    # The unsalted sha256 in hash_secret is safe only for high-entropy secrets.
    token = _token(app_client, admin_headers, "entropy", ["admin:read"])
    tenant = app_client.post("/admin/v1/tenants", json={"name": "t"}, headers=admin_headers)
    key = app_client.post(
        f"/admin/v1/tenants/{tenant.json()['id']}/keys", json={}, headers=admin_headers
    ).json()["key"]
    for secret, prefix in ((token, "sr-admin-"), (key, "sk-sr-")):
        body = secret.removeprefix(prefix)
        assert len(body) == 43  # base64url of 32 bytes, unpadded
        assert len(base64.urlsafe_b64decode(body + "=")) == 32
