"""Audit and decisions listings: filters and cursor pagination."""

from typing import Any

from fastapi.testclient import TestClient

from tests.control.conftest import WAIVE_ALL


def test_audit_filters_and_cursor_pages(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    for i in range(5):
        assert app_client.post(
            "/admin/v1/pairs", json={"name": f"p{i}"}, headers=admin_headers
        ).is_success
    app_client.post("/admin/v1/tenants", json={"name": "t"}, headers=admin_headers)

    page1 = app_client.get(
        "/admin/v1/audit", params={"entity_type": "pair", "limit": 2}, headers=admin_headers
    ).json()
    assert [e["after"]["name"] for e in page1["items"]] == ["p4", "p3"]
    assert page1["next_cursor"] is not None
    page2 = app_client.get(
        "/admin/v1/audit",
        params={"entity_type": "pair", "limit": 2, "cursor": page1["next_cursor"]},
        headers=admin_headers,
    ).json()
    assert [e["after"]["name"] for e in page2["items"]] == ["p2", "p1"]
    page3 = app_client.get(
        "/admin/v1/audit",
        params={"entity_type": "pair", "limit": 2, "cursor": page2["next_cursor"]},
        headers=admin_headers,
    ).json()
    assert [e["after"]["name"] for e in page3["items"]] == ["p0"]
    assert page3["next_cursor"] is None

    tenants = app_client.get(
        "/admin/v1/audit", params={"action": "tenant.create"}, headers=admin_headers
    ).json()
    assert [e["entity_type"] for e in tenants["items"]] == ["tenant"]
    bad_cursor = app_client.get("/admin/v1/audit?cursor=abc", headers=admin_headers)
    assert bad_cursor.status_code == 422
    future = app_client.get(
        "/admin/v1/audit", params={"since": "2999-01-01T00:00:00Z"}, headers=admin_headers
    ).json()
    assert future["items"] == []


def test_decisions_filter_by_rollout_and_kind(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    rid = seeded["rollout"]["id"]
    for action in ("start", "promote", "pause"):
        assert app_client.post(
            f"/admin/v1/rollouts/{rid}/{action}",
            headers=admin_headers,
            json=WAIVE_ALL if action == "start" else None,
        ).is_success
    listed = app_client.get(
        "/admin/v1/decisions", params={"rollout_id": rid}, headers=admin_headers
    ).json()
    assert [d["kind"] for d in listed["items"]] == [
        "manual_pause",
        "manual_promote",
        "manual_start",
    ]
    assert listed["items"][0]["rollout_version"] == 4
    assert listed["items"][0]["actor"] == "admin:bootstrap"
    kind = app_client.get(
        "/admin/v1/decisions", params={"kind": "manual_promote"}, headers=admin_headers
    ).json()
    assert [(d["from_state"], d["to_state"]) for d in kind["items"]] == [("canary", "ramping")]
    one = app_client.get(f"/admin/v1/decisions/{kind['items'][0]['id']}", headers=admin_headers)
    assert one.status_code == 200 and one.json()["has_record"] is True
    # Admin actions get the same ADR record as automated flips.
    record = app_client.get(
        f"/admin/v1/decisions/{kind['items'][0]['id']}/record", headers=admin_headers
    )
    assert record.status_code == 200
    assert record.headers["content-type"].startswith("text/markdown")
    for section in ("## Context", "## Evidence", "## Reversal trigger", "## Unresolved risk"):
        assert section in record.text
    assert "ramping" in record.text
    none = app_client.get(
        "/admin/v1/decisions", params={"rollout_id": 99999}, headers=admin_headers
    )
    assert none.json() == {"items": [], "next_cursor": None}
    assert app_client.get("/admin/v1/decisions/99999", headers=admin_headers).status_code == 404
