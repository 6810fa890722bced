"""Idempotency-Key: a replay returns the stored response and changes nothing."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import ApiKey, AuditEvent, Decision, IdempotencyRecord, Pair, Rollout
from tests.control.conftest import WAIVE_ALL


def test_replay_returns_the_stored_response_and_writes_nothing(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    headers = {**admin_headers, "Idempotency-Key": "k-1"}
    first = app_client.post("/admin/v1/pairs", json={"name": "p"}, headers=headers)
    assert first.status_code == 201
    assert "Idempotent-Replayed" not in first.headers
    replay = app_client.post("/admin/v1/pairs", json={"name": "p"}, headers=headers)
    assert replay.status_code == 201
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json() == first.json()
    assert len(session.scalars(select(Pair)).all()) == 1
    assert len(session.scalars(select(AuditEvent)).all()) == 1
    record = session.scalars(select(IdempotencyRecord)).one()
    assert (record.actor, record.key, record.status_code) == ("admin:bootstrap", "k-1", 201)

    # Without a key the same body is a new request: the duplicate name conflicts.
    again = app_client.post("/admin/v1/pairs", json={"name": "p"}, headers=admin_headers)
    assert again.status_code == 409


def test_same_key_with_a_different_body_is_422(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    headers = {**admin_headers, "Idempotency-Key": "k-2"}
    assert (
        app_client.post("/admin/v1/pairs", json={"name": "a"}, headers=headers).status_code == 201
    )
    reused = app_client.post("/admin/v1/pairs", json={"name": "b"}, headers=headers)
    assert reused.status_code == 422
    assert reused.json()["error"]["code"] == "idempotency_key_reused"
    other_path = app_client.post("/admin/v1/tenants", json={"name": "a"}, headers=headers)
    assert other_path.status_code == 422
    assert session.scalars(select(Pair.name)).all() == ["a"]


def test_replayed_key_creation_never_reveals_the_key_again(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    tid = app_client.post("/admin/v1/tenants", json={"name": "t"}, headers=admin_headers).json()[
        "id"
    ]
    headers = {**admin_headers, "Idempotency-Key": "key-create"}
    first = app_client.post(f"/admin/v1/tenants/{tid}/keys", json={}, headers=headers)
    secret = first.json()["key"]
    assert secret.startswith("sk-sr-")
    replay = app_client.post(f"/admin/v1/tenants/{tid}/keys", json={}, headers=headers)
    assert replay.status_code == 201
    assert replay.json()["key"] != secret
    assert replay.json()["id"] == first.json()["id"]
    record = session.scalars(select(IdempotencyRecord)).one()
    assert secret not in str(record.response_body)
    assert len(session.scalars(select(ApiKey)).all()) == 1


def test_a_retried_promote_with_the_same_key_promotes_once(
    app_client: TestClient,
    admin_headers: dict[str, str],
    seeded: dict[str, Any],
    session: Session,
) -> None:
    rid = seeded["rollout"]["id"]
    assert app_client.post(
        f"/admin/v1/rollouts/{rid}/start", headers=admin_headers, json=WAIVE_ALL
    ).is_success
    headers = {**admin_headers, "Idempotency-Key": "promote-once"}
    first = app_client.post(f"/admin/v1/rollouts/{rid}/promote", headers=headers)
    retry = app_client.post(f"/admin/v1/rollouts/{rid}/promote", headers=headers)
    assert first.status_code == retry.status_code == 200
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert retry.headers["ETag"] == first.headers["ETag"] == '"3"'
    assert (retry.json()["state"], retry.json()["percentage"]) == ("ramping", 5.0)
    rollout = session.get(Rollout, rid)
    assert rollout is not None
    session.refresh(rollout)
    assert (rollout.version, rollout.percentage) == (3, 5.0)
    promotions = session.scalars(select(Decision).where(Decision.kind == "manual_promote")).all()
    assert len(promotions) == 1
