"""The threshold sets' routes: every change a new version; degenerate tests refused."""

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import AuditEvent, ThresholdSet
from control.snapshot.version import current_snapshot_version
from tests.control.conftest import THRESHOLDS


def test_threshold_change_creates_a_new_version(
    app_client: TestClient, admin_headers: dict[str, str], session: Session
) -> None:
    snapshot_before = current_snapshot_version(session)
    first = app_client.post(
        "/admin/v1/threshold-sets", json={"name": "strict", **THRESHOLDS}, headers=admin_headers
    )
    assert first.status_code == 201
    assert first.json()["version"] == 1
    changed = app_client.post(
        f"/admin/v1/threshold-sets/{first.json()['id']}/versions",
        json={"min_speedup": 1.3},
        headers=admin_headers,
    )
    assert changed.status_code == 201
    assert (changed.json()["version"], changed.json()["min_speedup"]) == (2, 1.3)
    assert changed.json()["min_acceptance_rate"] == THRESHOLDS["min_acceptance_rate"]
    rows = session.scalars(
        select(ThresholdSet).where(ThresholdSet.name == "strict").order_by(ThresholdSet.version)
    ).all()
    assert [(r.version, r.min_speedup) for r in rows] == [(1, 1.1), (2, 1.3)]
    assert current_snapshot_version(session) == snapshot_before + 2
    duplicate = app_client.post(
        "/admin/v1/threshold-sets", json={"name": "strict", **THRESHOLDS}, headers=admin_headers
    )
    assert duplicate.status_code == 409
    out_of_range = app_client.post(
        f"/admin/v1/threshold-sets/{first.json()['id']}/versions",
        json={"min_acceptance_rate": 1.5},
        headers=admin_headers,
    )
    assert out_of_range.status_code == 422
    listed = app_client.get("/admin/v1/threshold-sets?name=strict", headers=admin_headers)
    assert [r["version"] for r in listed.json()["items"]] == [1, 2]
    audit = session.scalars(
        select(AuditEvent).where(AuditEvent.action == "threshold_set.version")
    ).one()
    assert audit.after is not None and audit.after["min_speedup"] == 1.3


def test_degenerate_acceptance_tests_and_margins_are_refused(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    url = "/admin/v1/threshold-sets"
    for name, bad in (
        ("zero-min", {"min_acceptance_rate": 0.0}),
        ("no-room", {"min_acceptance_rate": 0.95, "acceptance_indifference": 0.05}),
        ("tiny-zone", {"acceptance_indifference": 0.001}),
        ("no-margin", {"latency_margin": 0.0}),
        ("no-holdout", {"holdout_percentage": 0.0}),
        ("no-budget", {"false_alarm_rate": 0.0}),
        ("no-such-action", {"no_benefit_action": "disable"}),
    ):
        response = app_client.post(
            url, json={"name": name, **THRESHOLDS, **bad}, headers=admin_headers
        )
        assert response.status_code == 422, (name, response.text)
    created = app_client.post(url, json={"name": "ok", **THRESHOLDS}, headers=admin_headers)
    assert created.status_code == 201
    body = created.json()
    # The defaults every new field gets.
    assert (body["false_alarm_rate"], body["holdout_percentage"]) == (0.01, 10.0)
    assert (body["acceptance_indifference"], body["latency_margin"]) == (0.1, 0.1)
    assert body["no_benefit_action"] == "pause"
    rolls_back = app_client.post(
        f"{url}/{body['id']}/versions",
        json={"no_benefit_action": "rollback"},
        headers=admin_headers,
    )
    assert rolls_back.status_code == 201, rolls_back.text
    assert (rolls_back.json()["version"], rolls_back.json()["no_benefit_action"]) == (2, "rollback")
    # A change that is valid alone but makes the merged set degenerate: 422, not 500.
    merged = app_client.post(
        f"{url}/{body['id']}/versions",
        json={"acceptance_indifference": 0.5, "min_acceptance_rate": 0.6},
        headers=admin_headers,
    )
    assert merged.status_code == 422, merged.text
    assert "min_acceptance_rate + acceptance_indifference" in merged.json()["error"]["message"]
