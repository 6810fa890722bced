"""The segments' routes: ETag / If-Match, selector validation, deletes in use."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import AuditEvent, Segment


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
