"""The pools' routes: create, read, update, delete and validation."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import AuditEvent, Pool
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
