"""Rollout lifecycle through the admin API: rows, decisions, audit, snapshot bumps."""

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.decisions.record import SECTIONS
from control.models import AuditEvent, Decision, Rollout
from control.snapshot.version import current_snapshot_version
from tests.control.conftest import WAIVE_ALL


def _act(client: TestClient, headers: dict[str, str], rid: int, action: str, **extra: Any) -> Any:
    return client.post(f"/admin/v1/rollouts/{rid}/{action}", headers=headers, **extra)


def test_created_rollout_is_a_draft_with_etag(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    rid = seeded["rollout"]["id"]
    response = app_client.get(f"/admin/v1/rollouts/{rid}", headers=admin_headers)
    assert response.status_code == 200
    assert response.headers["ETag"] == '"1"'
    body = response.json()
    assert body["state"] == "draft"
    assert body["percentage"] == 0.0
    assert body["allowed_actions"] == ["evaluate", "start"]
    assert len(body["cohort_salt"]) == 32
    row = session.get(Rollout, rid)
    assert row is not None and row.state == "draft"
    audit = session.scalars(select(AuditEvent).where(AuditEvent.action == "rollout.create")).one()
    assert audit.entity_id == str(rid)
    assert audit.actor == "admin:bootstrap"


def test_start_promote_to_full_writes_decisions_audit_and_bumps_snapshot(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    rid = seeded["rollout"]["id"]
    snapshot_before = current_snapshot_version(session)

    started = _act(app_client, admin_headers, rid, "start", json={**WAIVE_ALL, "reason": "canary"})
    assert started.status_code == 200, started.text
    assert started.json()["state"] == "canary"
    assert started.json()["percentage"] == 1.0
    assert started.headers["ETag"] == '"2"'

    for expected_state, expected_pct in (("ramping", 5.0), ("ramping", 25.0), ("full", 100.0)):
        promoted = _act(app_client, admin_headers, rid, "promote")
        assert promoted.status_code == 200, promoted.text
        assert (promoted.json()["state"], promoted.json()["percentage"]) == (
            expected_state,
            expected_pct,
        )

    session.expire_all()
    assert current_snapshot_version(session) == snapshot_before + 4
    decisions = session.scalars(
        select(Decision).where(Decision.rollout_id == rid).order_by(Decision.id)
    ).all()
    assert [(d.from_state, d.to_state) for d in decisions] == [
        ("draft", "canary"),
        ("canary", "ramping"),
        ("ramping", "ramping"),
        ("ramping", "full"),
    ]
    assert [d.rollout_version for d in decisions] == [2, 3, 4, 5]
    assert decisions[0].kind == "manual_start"
    assert decisions[-1].record_markdown is not None
    assert "rollout code-tiny → full" in decisions[-1].record_markdown
    # Every flip gets its record, in the one ADR format.
    start_record = decisions[0].record_markdown
    assert start_record is not None and start_record.startswith("# Manual start: rollout")
    for section in SECTIONS:
        assert f"## {section}" in start_record
    actions = session.scalars(
        select(AuditEvent.action).where(AuditEvent.entity_type == "rollout").order_by(AuditEvent.id)
    ).all()
    assert actions == [
        "rollout.create",
        "rollout.start",
        "rollout.waive",
        "rollout.promote",
        "rollout.promote",
        "rollout.promote",
    ]
    start_audit = session.scalars(
        select(AuditEvent).where(AuditEvent.action == "rollout.start")
    ).one()
    assert start_audit.reason == "canary"
    assert start_audit.before is not None and start_audit.before["state"] == "draft"
    assert start_audit.after is not None and start_audit.after["state"] == "canary"

    record = app_client.get(f"/admin/v1/decisions/{decisions[-1].id}/record", headers=admin_headers)
    assert record.status_code == 200
    assert record.headers["content-type"].startswith("text/markdown")
    assert record.text == decisions[-1].record_markdown
    # A hold (an inconclusive round the automation records) changes nothing: no record.
    hold = Decision(
        rollout_id=rid,
        kind="hold",
        from_state="full",
        to_state="full",
        from_percentage=100.0,
        to_percentage=100.0,
        rollout_version=5,
        evidence={},
        threshold_set_id=decisions[-1].threshold_set_id,
        actor="automation",
    )
    session.add(hold)
    session.flush()
    no_record = app_client.get(f"/admin/v1/decisions/{hold.id}/record", headers=admin_headers)
    assert no_record.status_code == 404
    assert no_record.json()["error"]["code"] == "record_not_found"


def test_illegal_transition_is_409_naming_allowed_actions(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    rid = seeded["rollout"]["id"]
    response = _act(app_client, admin_headers, rid, "promote")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "illegal_transition"
    assert error["details"]["allowed_actions"] == ["evaluate", "start"]
    assert "allowed: evaluate, start" in error["message"]
    row = session.get(Rollout, rid)
    assert row is not None and (row.state, row.version) == ("draft", 1)
    assert session.scalars(select(Decision)).all() == []


def test_stale_if_match_is_412_and_changes_nothing(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    rid = seeded["rollout"]["id"]
    assert _act(app_client, admin_headers, rid, "start", json=WAIVE_ALL).status_code == 200
    stale = _act(app_client, {**admin_headers, "If-Match": '"1"'}, rid, "pause")
    assert stale.status_code == 412
    assert stale.json()["error"]["code"] == "stale_version"
    assert stale.json()["error"]["details"]["current_version"] == 2
    fresh = _act(app_client, {**admin_headers, "If-Match": '"2"'}, rid, "pause")
    assert fresh.status_code == 200
    assert fresh.json()["state"] == "paused"
    assert fresh.json()["paused_from"] == "canary"
    resumed = _act(app_client, admin_headers, rid, "resume")
    assert (resumed.json()["state"], resumed.json()["percentage"]) == ("canary", 1.0)
    row = session.get(Rollout, rid)
    assert row is not None and row.version == 4


def test_disable_enable_probation_and_rollback(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    rid = seeded["rollout"]["id"]
    _act(app_client, admin_headers, rid, "start", json=WAIVE_ALL)
    disabled = _act(app_client, admin_headers, rid, "disable", json={"reason": "low acceptance"})
    assert (disabled.json()["state"], disabled.json()["percentage"]) == ("disabled", 0.0)
    assert disabled.json()["disable_count"] == 1
    assert disabled.json()["disabled_reason"] == "low acceptance"
    enabled = _act(app_client, admin_headers, rid, "enable")
    # NOTE: probation re-exposes at the threshold set's probation percentage (2 %).
    assert (enabled.json()["state"], enabled.json()["percentage"]) == ("probation", 2.0)
    rolled = _act(app_client, admin_headers, rid, "rollback")
    assert (rolled.json()["state"], rolled.json()["percentage"]) == ("rolled_back", 0.0)
    disable_decision = session.scalars(
        select(Decision).where(Decision.to_state == "disabled")
    ).one()
    assert disable_decision.record_markdown is not None
    assert "low acceptance" in disable_decision.record_markdown


def test_unknown_action_and_unknown_rollout(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    rid = seeded["rollout"]["id"]
    unknown_action = _act(app_client, admin_headers, rid, "explode")
    assert unknown_action.status_code == 422
    assert unknown_action.json()["error"]["param"] == "action"
    missing = _act(app_client, admin_headers, 999_999, "start")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "rollout_not_found"


def test_patch_needs_if_match_and_a_second_rollout_per_segment_conflicts(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    rid = seeded["rollout"]["id"]
    url = f"/admin/v1/rollouts/{rid}"
    no_match = app_client.patch(url, json={"stages": [2, 100]}, headers=admin_headers)
    assert no_match.status_code == 428
    ok = app_client.patch(
        url, json={"stages": [2, 100]}, headers={**admin_headers, "If-Match": '"1"'}
    )
    assert ok.status_code == 200
    assert ok.json()["stages"] == [2.0, 100.0]
    assert ok.headers["ETag"] == '"2"'
    bad_stages = app_client.patch(
        url, json={"stages": [50, 5]}, headers={**admin_headers, "If-Match": '"2"'}
    )
    assert bad_stages.status_code == 422
    body = {
        **{
            k: seeded["rollout"][k]
            for k in (
                "segment_id",
                "pair_version_id",
                "spec_pool_id",
                "baseline_pool_id",
                "threshold_set_id",
            )
        },
        "name": "second",
    }
    second = app_client.post("/admin/v1/rollouts", json=body, headers=admin_headers)
    assert second.status_code == 409
    assert second.json()["error"]["details"]["rollouts"] == ["code-tiny"]
    assert session.scalars(select(Rollout.name)).all() == ["code-tiny"]


def test_rollout_refuses_a_speculating_baseline(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    body = {
        "name": "bad",
        "segment_id": seeded["segment"]["id"],
        "pair_version_id": seeded["version"]["id"],
        "spec_pool_id": seeded["spec_pool"]["id"],
        "baseline_pool_id": seeded["spec_pool"]["id"],
        "threshold_set_id": seeded["thresholds"]["id"],
    }
    response = app_client.post("/admin/v1/rollouts", json=body, headers=admin_headers)
    assert response.status_code == 422
    assert response.json()["error"]["param"] == "baseline_pool_id"
