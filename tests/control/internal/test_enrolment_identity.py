"""An agent token is bound to its pool's identity, not to a reusable id (issue #21,
item 2): deleting the pool revokes it, and on SQLite, where the next pool gets the
deleted one's id, the old token cannot heartbeat into it or read its spec."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from control.models import AdminToken, AuditEvent, Pool, Worker
from tests.control.internal.factories import beat

ORIGIN = "http://127.0.0.1:8101"


def _pool(client: TestClient, admin: dict[str, str], name: str) -> int:
    created = client.post(
        "/admin/v1/pools",
        json={"name": name, "served_model_name": "tiny", "target_ref": "/models/t"},
        headers=admin,
    )
    assert created.status_code == 201, created.text
    pool_id: int = created.json()["id"]
    return pool_id


def _enrol(client: TestClient, admin: dict[str, str], pool_id: int, name: str) -> dict[str, Any]:
    response = client.post(
        f"/admin/v1/pools/{pool_id}/agent-tokens",
        json={"name": name, "allowed_endpoints": [ORIGIN]},
        headers=admin,
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def _calls(client: TestClient, token: str, pool_id: int, worker: str) -> tuple[int, int, int]:
    """(heartbeat, spec by id, spec by name) statuses for `pool_id` with `token`."""
    headers = {"Authorization": f"Bearer {token}"}
    beat_status = client.post(
        f"/internal/v1/workers/{worker}/heartbeat",
        content=beat(pool_id, endpoint_url=f"{ORIGIN}/").model_dump_json(),
        headers=headers | {"content-type": "application/json"},
    ).status_code
    spec = client.get(f"/internal/v1/pools/{pool_id}/spec", headers=headers).status_code
    by_name = client.get("/internal/v1/pools/by-name/second/spec", headers=headers).status_code
    return beat_status, spec, by_name


def test_deleting_a_pool_revokes_its_agent_tokens(
    app_client: TestClient, admin_headers: dict[str, str], session: Session, db_backend: str
) -> None:
    first = _pool(app_client, admin_headers, "first")
    token = _enrol(app_client, admin_headers, first, "agent-first")
    assert (
        app_client.get(
            f"/internal/v1/pools/{first}/spec",
            headers={"Authorization": f"Bearer {token['token']}"},
        ).status_code
        == 200
    )

    deleted = app_client.delete(
        f"/admin/v1/pools/{first}", headers={**admin_headers, "If-Match": "*"}
    )
    assert deleted.status_code == 204
    second = _pool(app_client, admin_headers, "second")
    if db_backend == "sqlite":
        assert second == first  # the reuse that made the old token dangerous

    assert _calls(app_client, token["token"], second, "old-agent-w") == (401, 401, 401)
    row = session.get(AdminToken, token["id"])
    assert row is not None and row.revoked_at is not None
    audit = session.scalars(select(AuditEvent).where(AuditEvent.action == "pool.delete")).one()
    assert audit.after == {"revoked_agent_tokens": [token["id"]]}
    assert session.scalars(select(Worker)).all() == []


def test_a_token_whose_pool_row_vanished_is_enrolled_for_nothing(
    app_client: TestClient, admin_headers: dict[str, str], session: Session, db_backend: str
) -> None:
    """Defence in depth: the pool deleted around the API (no revocation), and another
    pool with the same id: the old token is refused, the same 403 as for any pool it
    is not enrolled for, and writes nothing."""
    first = _pool(app_client, admin_headers, "first")
    token = _enrol(app_client, admin_headers, first, "agent-first")
    session.execute(delete(Pool).where(Pool.id == first))
    session.commit()
    second = _pool(app_client, admin_headers, "second")
    if db_backend == "sqlite":
        assert second == first

    assert _calls(app_client, token["token"], second, "old-agent-w") == (403, 403, 403)
    refused = app_client.get(
        f"/internal/v1/pools/{second}/spec",
        headers={"Authorization": f"Bearer {token['token']}"},
    )
    assert refused.json()["error"]["code"] == "pool_not_enrolled"
    assert session.scalars(select(Worker)).all() == []

    # The new pool's own enrolment works.
    fresh = _enrol(app_client, admin_headers, second, "agent-second")
    assert _calls(app_client, fresh["token"], second, "new-agent-w") == (200, 200, 200)
