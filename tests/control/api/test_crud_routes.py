"""The remaining CRUD routes: listings, updates, deletes and their error paths."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import AuditEvent, Pair, Rollout, Segment
from control.snapshot.version import current_snapshot_version
from tests.control.conftest import WAIVE_ALL


def test_pair_list_update_and_delete(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    pid = app_client.post("/admin/v1/pairs", json={"name": "lone"}, headers=admin_headers).json()[
        "id"
    ]
    listed = app_client.get("/admin/v1/pairs", headers=admin_headers).json()
    assert [(p["name"], p["versions"]) for p in listed["items"]] == [("lone", [])]
    patched = app_client.patch(
        f"/admin/v1/pairs/{pid}",
        json={"description": "new"},
        headers={**admin_headers, "If-Match": '"1"'},
    )
    assert patched.status_code == 200
    assert (patched.json()["description"], patched.json()["version"]) == ("new", 2)
    not_found = app_client.patch(
        "/admin/v1/pairs/987654",
        json={"description": "x"},
        headers={**admin_headers, "If-Match": '"1"'},
    )
    assert not_found.status_code == 404
    assert not_found.json()["error"]["code"] == "pair_not_found"
    unconditional = app_client.delete(f"/admin/v1/pairs/{pid}", headers=admin_headers)
    assert unconditional.status_code == 428
    deleted = app_client.delete(
        f"/admin/v1/pairs/{pid}", headers={**admin_headers, "If-Match": patched.headers["ETag"]}
    )
    assert deleted.status_code == 204
    assert session.get(Pair, pid) is None
    actions = session.scalars(
        select(AuditEvent.action).where(AuditEvent.entity_type == "pair").order_by(AuditEvent.id)
    ).all()
    assert actions == ["pair.create", "pair.update", "pair.delete"]


def test_listings_of_pools_segments_tenants_and_rollout_filters(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    pools = app_client.get("/admin/v1/pools", headers=admin_headers).json()["items"]
    assert [p["name"] for p in pools] == ["tiny-spec", "tiny-base"]
    segments = app_client.get("/admin/v1/segments", headers=admin_headers).json()["items"]
    assert [s["name"] for s in segments] == ["code"]
    app_client.post("/admin/v1/tenants", json={"name": "acme"}, headers=admin_headers)
    tenants = app_client.get("/admin/v1/tenants", headers=admin_headers).json()["items"]
    assert [t["name"] for t in tenants] == ["acme"]
    drafts = app_client.get("/admin/v1/rollouts?state=draft", headers=admin_headers).json()
    assert [r["name"] for r in drafts["items"]] == ["code-tiny"]
    canaries = app_client.get("/admin/v1/rollouts?state=canary", headers=admin_headers).json()
    assert canaries == {"items": [], "next_cursor": None}
    by_segment = app_client.get(
        f"/admin/v1/rollouts?segment_id={seeded['segment']['id']}", headers=admin_headers
    ).json()["items"]
    assert [r["id"] for r in by_segment] == [seeded["rollout"]["id"]]
    bad_state = app_client.get("/admin/v1/rollouts?state=sideways", headers=admin_headers)
    assert bad_state.status_code == 422
    missing = app_client.get("/admin/v1/threshold-sets/987654", headers=admin_headers)
    assert missing.status_code == 404


def test_rollout_delete_only_as_draft_and_unknown_threshold_on_patch(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    rid = seeded["rollout"]["id"]
    unknown = app_client.patch(
        f"/admin/v1/rollouts/{rid}",
        json={"threshold_set_id": 987654},
        headers={**admin_headers, "If-Match": '"1"'},
    )
    assert unknown.status_code == 422
    assert unknown.json()["error"]["param"] == "threshold_set_id"
    stale_delete = app_client.delete(
        f"/admin/v1/rollouts/{rid}", headers={**admin_headers, "If-Match": '"7"'}
    )
    assert stale_delete.status_code == 412
    assert app_client.post(
        f"/admin/v1/rollouts/{rid}/start", headers=admin_headers, json=WAIVE_ALL
    ).is_success
    live = app_client.delete(
        f"/admin/v1/rollouts/{rid}", headers={**admin_headers, "If-Match": "*"}
    )
    assert live.status_code == 409
    assert session.get(Rollout, rid) is not None


def test_draft_rollout_and_its_segment_can_be_deleted(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    rid, sid = seeded["rollout"]["id"], seeded["segment"]["id"]
    before = current_snapshot_version(session)
    deleted = app_client.delete(
        f"/admin/v1/rollouts/{rid}", headers={**admin_headers, "If-Match": '"1"'}
    )
    assert deleted.status_code == 204
    assert session.get(Rollout, rid) is None
    stale = app_client.delete(
        f"/admin/v1/segments/{sid}", headers={**admin_headers, "If-Match": '"2"'}
    )
    assert stale.status_code == 412
    assert (
        app_client.delete(
            f"/admin/v1/segments/{sid}", headers={**admin_headers, "If-Match": '"1"'}
        ).status_code
        == 204
    )
    assert session.get(Segment, sid) is None
    assert current_snapshot_version(session) == before + 2
    deletes = session.scalars(
        select(AuditEvent.action).where(AuditEvent.action.like("%.delete")).order_by(AuditEvent.id)
    ).all()
    assert deletes == ["rollout.delete", "segment.delete"]


def test_admin_token_names_are_unique_and_unknown_ids_404(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    body = {"name": "ops", "scopes": ["admin:read"]}
    assert app_client.post("/admin/v1/admin-tokens", json=body, headers=admin_headers).is_success
    again = app_client.post("/admin/v1/admin-tokens", json=body, headers=admin_headers)
    assert again.status_code == 409
    bad_scope = app_client.post(
        "/admin/v1/admin-tokens", json={"name": "x", "scopes": ["root"]}, headers=admin_headers
    )
    assert bad_scope.status_code == 422
    revoke = app_client.post("/admin/v1/admin-tokens/987654/revoke", headers=admin_headers)
    assert revoke.status_code == 404
    tenant = app_client.post("/admin/v1/tenants/987654/keys", json={}, headers=admin_headers)
    assert tenant.status_code == 404
    assert tenant.json()["error"]["code"] == "tenant_not_found"
