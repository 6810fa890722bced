"""Least privilege on the internal API: the gateway reads the snapshot and writes
telemetry, an engine agent heartbeats only for the pool it was enrolled for, from the
origins its enrolment allows; neither can do the other's job, and no agent can read
the tenants' key hashes."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import Worker
from tests.control.internal.factories import beat, build_world

SNAPSHOT = "/internal/v1/snapshot"


def _beat(
    client: TestClient, headers: dict[str, str], worker: str, pool_id: int, **fields: Any
) -> Any:
    return client.post(
        f"/internal/v1/workers/{worker}/heartbeat",
        content=beat(pool_id, **fields).model_dump_json(),
        headers=headers | {"content-type": "application/json"},
    )


def _enrol(
    client: TestClient, admin: dict[str, str], pool_id: int, origins: list[str], name: str
) -> dict[str, Any]:
    response = client.post(
        f"/admin/v1/pools/{pool_id}/agent-tokens",
        json={"name": name, "allowed_endpoints": origins},
        headers=admin,
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    assert body["scopes"] == ["internal:agent"]
    extra = dict(body["extra"])
    # The pool's uid: what the enrolment is bound to (ids are reused on SQLite).
    assert len(extra.pop("pool_uid")) == 32
    assert extra == {"pool_id": pool_id, "allowed_endpoints": origins}
    return body


def test_an_enrolled_agent_heartbeats_only_for_its_pool_and_origins(
    app_client: TestClient, session: Session, admin_headers: dict[str, str]
) -> None:
    world = build_world(session)
    session.commit()
    spec, base = world.spec_pool.id, world.baseline_pool.id
    token = _enrol(app_client, admin_headers, spec, ["http://127.0.0.1:8101"], "a-spec")
    agent = {"Authorization": f"Bearer {token['token']}"}

    assert _beat(app_client, agent, "w1", spec).status_code == 200
    other_pool = _beat(app_client, agent, "w2", base)
    assert other_pool.status_code == 403
    assert other_pool.json()["error"]["code"] == "pool_not_enrolled"
    elsewhere = _beat(app_client, agent, "w3", spec, endpoint_url="http://203.0.113.9:8101")
    assert elsewhere.status_code == 403
    assert elsewhere.json()["error"]["code"] == "endpoint_not_allowed"
    wrong_port = _beat(app_client, agent, "w3", spec, endpoint_url="http://127.0.0.1:9999")
    assert wrong_port.status_code == 403
    # Another pool's worker cannot be taken over (moved) by this pool's agent.
    base_token = _enrol(app_client, admin_headers, base, ["http://127.0.0.1"], "a-base")
    base_agent = {"Authorization": f"Bearer {base_token['token']}"}
    assert _beat(app_client, base_agent, "base-w", base).status_code == 200
    hijack = _beat(app_client, agent, "base-w", spec)
    assert hijack.status_code == 403
    assert hijack.json()["error"]["code"] == "worker_of_another_pool"
    session.expire_all()
    assert {(w.id, w.pool_id) for w in session.scalars(select(Worker))} == {
        ("w1", spec),
        ("base-w", base),
    }
    # The agent reads its own pool's spec, not another's.
    own = app_client.get(f"/internal/v1/pools/{spec}/spec", headers=agent)
    assert own.status_code == 200 and own.json()["id"] == spec
    assert app_client.get(f"/internal/v1/pools/{base}/spec", headers=agent).status_code == 403


def test_agents_cannot_read_the_snapshot_and_gateways_cannot_heartbeat(
    app_client: TestClient,
    session: Session,
    admin_headers: dict[str, str],
    internal_headers: dict[str, str],
) -> None:
    world = build_world(session)
    session.commit()
    token = _enrol(app_client, admin_headers, world.spec_pool.id, ["http://127.0.0.1"], "a1")
    agent = {"Authorization": f"Bearer {token['token']}"}
    snapshot = app_client.get(SNAPSHOT, headers=agent)
    assert snapshot.status_code == 403
    assert snapshot.json()["error"]["code"] == "gateway_only"
    assert "key_hashes" not in snapshot.text
    telemetry = app_client.post("/internal/v1/telemetry", json={}, headers=agent)
    assert telemetry.status_code == 403
    # The gateway's token reads the snapshot (with the key hashes it needs)...
    read = app_client.get(SNAPSHOT, headers=internal_headers)
    assert read.status_code == 200 and "key_hashes" in read.text
    # ...and can register no worker anywhere.
    denied = _beat(app_client, internal_headers, "evil", world.spec_pool.id)
    assert denied.status_code == 403
    assert denied.json()["error"]["code"] == "agent_only"
    assert session.get(Worker, "evil") is None


def test_tokens_are_minted_per_principal_and_revocation_takes_effect(
    app_client: TestClient, session: Session, admin_headers: dict[str, str]
) -> None:
    world = build_world(session)
    session.commit()
    # Agent tokens exist only as enrolments of a pool.
    direct = app_client.post(
        "/admin/v1/admin-tokens",
        json={"name": "agent-direct", "scopes": ["internal:agent"]},
        headers=admin_headers,
    )
    assert direct.status_code == 422
    assert direct.json()["error"]["code"] == "agent_token_needs_enrolment"
    mixed = app_client.post(
        "/admin/v1/admin-tokens",
        json={"name": "gw-admin", "scopes": ["internal:gateway", "admin:write"]},
        headers=admin_headers,
    )
    assert mixed.status_code == 422
    # A second gateway credential (for rotation): reads the snapshot, nothing admin.
    gateway = app_client.post(
        "/admin/v1/admin-tokens",
        json={"name": "gw-2", "scopes": ["internal:gateway"]},
        headers=admin_headers,
    ).json()
    gw = {"Authorization": f"Bearer {gateway['token']}"}
    assert app_client.get(SNAPSHOT, headers=gw).status_code == 200
    assert app_client.get("/admin/v1/pools", headers=gw).status_code == 403
    # A write-only admin token cannot mint a gateway token (it does not hold the scope).
    writer = app_client.post(
        "/admin/v1/admin-tokens",
        json={"name": "w", "scopes": ["admin:write"]},
        headers=admin_headers,
    ).json()
    escalate = app_client.post(
        "/admin/v1/admin-tokens",
        json={"name": "gw-3", "scopes": ["internal:gateway"]},
        headers={"Authorization": f"Bearer {writer['token']}"},
    )
    assert escalate.status_code == 403
    # Admin tokens are not internal principals.
    admin_token = {"Authorization": f"Bearer {writer['token']}"}
    assert app_client.get(SNAPSHOT, headers=admin_token).status_code == 403

    token = _enrol(app_client, admin_headers, world.spec_pool.id, ["http://127.0.0.1"], "a2")
    agent = {"Authorization": f"Bearer {token['token']}"}
    assert _beat(app_client, agent, "w1", world.spec_pool.id).status_code == 200
    revoked = app_client.post(f"/admin/v1/admin-tokens/{token['id']}/revoke", headers=admin_headers)
    assert revoked.status_code == 200
    assert _beat(app_client, agent, "w1", world.spec_pool.id).status_code == 401
    assert app_client.post(f"/admin/v1/admin-tokens/{gateway['id']}/revoke", headers=admin_headers)
    assert app_client.get(SNAPSHOT, headers=gw).status_code == 401
    # Enrolment needs admin:write and names an origin, never a path.
    bad = app_client.post(
        f"/admin/v1/pools/{world.spec_pool.id}/agent-tokens",
        json={"name": "a3", "allowed_endpoints": ["http://127.0.0.1/v1"]},
        headers=admin_headers,
    )
    assert bad.status_code == 422
