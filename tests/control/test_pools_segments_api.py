"""Pools and segments (ETag / If-Match) through the admin API."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import AuditEvent, Pool, Segment
from control.snapshot.version import current_snapshot_version


def test_pool_crud_and_validation(
    app_client: TestClient,
    admin_headers: dict[str, str],
    seeded: dict[str, Any],
    model_dirs: dict[str, str],
    session: Session,
) -> None:
    spec = app_client.get(f"/admin/v1/pools/{seeded['spec_pool']['id']}", headers=admin_headers)
    assert spec.status_code == 200
    assert spec.json()["pair_version_id"] == seeded["version"]["id"]
    assert spec.json()["workers"] == []

    mismatch = app_client.post(
        "/admin/v1/pools",
        json={
            "name": "other",
            "served_model_name": "tiny",
            "target_ref": model_dirs["draft"],
            "pair_version_id": seeded["version"]["id"],
        },
        headers=admin_headers,
    )
    assert mismatch.status_code == 422
    assert mismatch.json()["error"]["code"] == "target_mismatch"
    unknown_version = app_client.post(
        "/admin/v1/pools",
        json={"name": "o2", "served_model_name": "t", "target_ref": "x", "pair_version_id": 9999},
        headers=admin_headers,
    )
    assert unknown_version.status_code == 422
    assert unknown_version.json()["error"]["param"] == "pair_version_id"

    before = current_snapshot_version(session)
    patched = app_client.patch(
        f"/admin/v1/pools/{seeded['baseline_pool']['id']}",
        json={"desired_workers": 3, "engine_args": {"max_model_len": 512}},
        headers={**admin_headers, "If-Match": '"1"'},
    )
    assert patched.status_code == 200
    row = session.get(Pool, seeded["baseline_pool"]["id"])
    assert row is not None
    session.refresh(row)
    assert (row.desired_workers, row.engine_args) == (3, {"max_model_len": 512})
    assert current_snapshot_version(session) == before + 1

    in_use = app_client.delete(
        f"/admin/v1/pools/{seeded['baseline_pool']['id']}",
        headers={**admin_headers, "If-Match": '"2"'},
    )
    assert in_use.status_code == 409
    assert in_use.json()["error"]["code"] == "pool_in_use"
    lone = app_client.post(
        "/admin/v1/pools",
        json={"name": "lone", "served_model_name": "t", "target_ref": "x"},
        headers=admin_headers,
    ).json()
    assert (
        app_client.delete(
            f"/admin/v1/pools/{lone['id']}", headers={**admin_headers, "If-Match": '"1"'}
        ).status_code
        == 204
    )
    assert session.get(Pool, lone["id"]) is None
    actions = session.scalars(
        select(AuditEvent.action).where(AuditEvent.entity_type == "pool").order_by(AuditEvent.id)
    ).all()
    assert actions == ["pool.create", "pool.create", "pool.update", "pool.create", "pool.delete"]


def test_segment_etag_if_match_and_selector_validation(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    created = app_client.post(
        "/admin/v1/segments",
        json={
            "name": "chat-cold",
            "selector": {"tasks": ["chat"], "temperature_max": 0.5},
            "priority": 5,
        },
        headers=admin_headers,
    )
    assert created.status_code == 201, created.text
    assert created.headers["ETag"] == '"1"'
    sid = created.json()["id"]
    row = session.get(Segment, sid)
    assert row is not None and row.selector == {"tasks": ["chat"], "temperature_max": 0.5}

    url = f"/admin/v1/segments/{sid}"
    assert app_client.get(url, headers=admin_headers).headers["ETag"] == '"1"'
    assert app_client.patch(url, json={"priority": 7}, headers=admin_headers).status_code == 428
    ok = app_client.patch(url, json={"priority": 7}, headers={**admin_headers, "If-Match": '"1"'})
    assert ok.status_code == 200
    assert (ok.json()["priority"], ok.json()["version"]) == (7, 2)
    assert ok.headers["ETag"] == '"2"'
    stale = app_client.patch(
        url, json={"priority": 9}, headers={**admin_headers, "If-Match": '"1"'}
    )
    assert stale.status_code == 412
    session.refresh(row)
    assert (row.priority, row.version) == (7, 2)
    garbage = app_client.patch(
        url, json={"priority": 9}, headers={**admin_headers, "If-Match": "yesterday"}
    )
    assert garbage.status_code == 422

    bad_range = app_client.post(
        "/admin/v1/segments",
        json={"name": "bad", "selector": {"temperature_min": 1.0, "temperature_max": 0.5}},
        headers=admin_headers,
    )
    assert bad_range.status_code == 422
    unknown_feature = app_client.post(
        "/admin/v1/segments",
        json={"name": "bad2", "selector": {"colour": "red"}},
        headers=admin_headers,
    )
    assert unknown_feature.status_code == 422
    assert unknown_feature.json()["error"]["field_errors"][0]["loc"] == [
        "body",
        "selector",
        "colour",
    ]
    update_audit = session.scalars(
        select(AuditEvent).where(AuditEvent.action == "segment.update")
    ).one()
    assert update_audit.before is not None and update_audit.before["priority"] == 5
    assert update_audit.after is not None and update_audit.after["priority"] == 7


def test_segment_in_use_cannot_be_deleted(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    response = app_client.delete(
        f"/admin/v1/segments/{seeded['segment']['id']}",
        headers={**admin_headers, "If-Match": '"1"'},
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "segment_in_use"
