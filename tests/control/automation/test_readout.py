"""GET /admin/v1/rollouts/{id}/evidence: the automation's view of a rollout, as a dry
run of the same rules the jobs apply (nothing is flipped or written)."""

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from control.app import create_app
from control.automation.pipeline import Job, judge_one
from control.cli import app as root
from control.db import Database
from control.settings import ControlSettings
from control.telemetry.service import ingest_batch
from specwire import Arm, PositionTokens, TelemetryWindow
from specwire.telemetry import UNKNOWN
from tests.control.automation import scenario as sc
from tests.control.conftest import sdk_http
from tests.fixtures.db import ADMIN_TOKEN

HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def _readout(client: TestClient, rollout_id: int) -> dict[str, Any]:
    response = client.get(f"/admin/v1/rollouts/{rollout_id}/evidence", headers=HEADERS)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_healthy_canary_shows_its_checks_acceptance_and_depth_advice(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    settings = control_settings.model_copy(update={"guard_on_telemetry": False})
    setup = sc.create_rollout(committed_database)
    sc.heartbeat(committed_database, setup, "spec-w1")
    window_ids = sc.good_traffic(committed_database, setup)
    advised = judge_one(committed_database, settings, Job.DEPTH, setup.rollout_id, "t-1")
    assert advised.action == "recommend", advised
    decisions_before = len(sc.decisions(committed_database, setup.rollout_id))

    client = TestClient(create_app(settings, committed_database))
    body = _readout(client, setup.rollout_id)
    assert (body["state"], body["percentage"]) == ("canary", 1.0)
    assert body["guards"]["action"] == "wait"
    # Good traffic: the evaluation would promote now; nothing blocks it.
    assert body["stage"]["action"] == "promote", body["stage"]
    assert set(body["promotion_checks"]) >= {"acceptance_accepted", "speedup_at_next_load"}
    assert all(body["promotion_checks"].values()) and body["blocking"] == []
    rates = body["evidence"]["acceptance"]["conditional_rates"]
    assert len(rates) == sc.K and all(0.6 < r < 0.95 for r in rates)
    assert sorted(
        body["evidence"]["spec"]["window_ids"] + body["evidence"]["baseline"]["window_ids"]
    ) == sorted(window_ids)
    assert "blocks" not in body["evidence"]
    [advice] = body["depth_advice"]
    assert advice["current_k"] == sc.K and advice["recommended_k"] >= 1

    # A dry run: no decision, no flip.
    assert len(sc.decisions(committed_database, setup.rollout_id)) == decisions_before
    assert sc.rollout(committed_database, setup.rollout_id).state == "canary"

    missing = client.get("/admin/v1/rollouts/987654/evidence", headers=HEADERS)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "rollout_not_found"
    assert client.get(f"/admin/v1/rollouts/{setup.rollout_id}/evidence").status_code == 401


def _ingest_with_positions(
    database: Database, setup: sc.Setup, buckets: dict[str, tuple[int, int]] | None
) -> TelemetryWindow:
    """One good-traffic batch whose spec window carries `buckets` (bucket -> drafted,
    accepted; None: sent without the field, as an older gateway does). Returns the
    stored spec window."""
    sent = sc.batch(setup, setup.rng, spec_alpha=0.8, spec_tpot_ms=10.0, baseline_tpot_ms=20.0)
    spec = next(w for w in sent.windows if w.arm == Arm.SPEC)
    spec.by_response_position = {
        b: PositionTokens(drafted_tokens=d, accepted_tokens=a)
        for b, (d, a) in (buckets or {}).items()
    }
    with database.session() as s:
        assert ingest_batch(s, sent).stored == 2
    return spec


def test_the_readout_sums_acceptance_by_response_position_over_the_spec_windows(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    settings = control_settings.model_copy(update={"guard_on_telemetry": False})
    setup = sc.create_rollout(committed_database)
    sc.heartbeat(committed_database, setup, "spec-w1")
    first = _ingest_with_positions(committed_database, setup, {"0-15": (40, 30), "16-63": (20, 10)})
    second = _ingest_with_positions(committed_database, setup, {"0-15": (60, 50), UNKNOWN: (5, 1)})
    # No buckets at all: the window's drafted and accepted tokens count as unknown.
    old = _ingest_with_positions(committed_database, setup, None)
    assert old.by_response_position == {} and old.drafted_tokens > 0

    client = TestClient(create_app(settings, committed_database))
    body = _readout(client, setup.rollout_id)
    assert len(body["evidence"]["spec"]["window_ids"]) == 3
    rows = {p["bucket"]: p for p in body["acceptance_by_response_position"]}
    assert list(rows) == ["0-15", "16-63", "64-255", "256+", UNKNOWN]
    # The buckets a window leaves out of its totals count as unknown too.
    unknown = (
        old.drafted_tokens + 5 + (first.drafted_tokens - 60) + (second.drafted_tokens - 65),
        old.accepted_tokens + 1 + (first.accepted_tokens - 40) + (second.accepted_tokens - 51),
    )
    expected = {"0-15": (100, 80), "16-63": (20, 10), "64-255": (0, 0), "256+": (0, 0)}
    expected[UNKNOWN] = unknown
    assert {b: (r["drafted_tokens"], r["accepted_tokens"]) for b, r in rows.items()} == expected
    assert rows["0-15"]["acceptance_rate"] == pytest.approx(0.8)
    assert rows["16-63"]["acceptance_rate"] == pytest.approx(0.5)
    assert rows["64-255"]["acceptance_rate"] is None
    assert sum(r["drafted_tokens"] for r in rows.values()) == sum(
        w.drafted_tokens for w in (first, second, old)
    )


def test_a_regression_reads_as_the_rollback_the_guard_would_do(
    committed_database: Database, control_settings: ControlSettings
) -> None:
    settings = control_settings.model_copy(update={"guard_on_telemetry": False})
    setup = sc.create_rollout(committed_database)
    sc.heartbeat(committed_database, setup, "spec-w1")
    client = TestClient(create_app(settings, committed_database))
    body: dict[str, Any] = {}
    for _ in range(6):
        sc.feed(committed_database, setup, spec_alpha=0.8, spec_tpot_ms=30.0, baseline_tpot_ms=20.0)
        body = _readout(client, setup.rollout_id)
        if body["guards"]["action"] == "rollback":
            break
    assert body["guards"]["action"] == "rollback", body["guards"]
    assert body["guards"]["code"] == "latency_regression"
    assert body["evidence"]["latency_guard"]["cusum"]["alarm"] is True
    assert sc.rollout(committed_database, setup.rollout_id).state == "canary"
    assert sc.decisions(committed_database, setup.rollout_id)[-1].kind == "manual_start"

    # The guard job, run now, does exactly what the readout said.
    outcome = judge_one(committed_database, settings, Job.GUARD, setup.rollout_id, "task-g")
    assert outcome.action == "rollback"


def test_rollout_show_prints_the_readout(
    committed_database: Database, control_settings: ControlSettings, monkeypatch: Any
) -> None:
    settings = control_settings.model_copy(update={"guard_on_telemetry": False})
    setup = sc.create_rollout(committed_database)
    sc.heartbeat(committed_database, setup, "spec-w1")
    sc.good_traffic(committed_database, setup)
    client = TestClient(create_app(settings, committed_database))

    import control.cli.admin.session as session
    from specwire.admin_client import AdminClient

    def in_process(url: str, token: str) -> AdminClient:
        # NOTE: the app runs in-process (TestClient) so the test shares its database.
        client.base_url = "http://testserver/admin/v1"
        client.headers["Authorization"] = f"Bearer {token}"
        return AdminClient(url, http=sdk_http(client))

    monkeypatch.setattr(session, "make_client", in_process)
    runner = CliRunner(env={"SPECROUTE_ADMIN_TOKEN": ADMIN_TOKEN, "COLUMNS": "160"})
    shown = runner.invoke(root, ["admin", "rollout", "show", str(setup.rollout_id)])
    assert shown.exit_code == 0, shown.output
    for line in (
        "guards",
        "promote",
        "blocks promotion",
        "acceptance per position",
        "acceptance by response position",
        "unknown",
    ):
        assert line in shown.output, shown.output
    as_json = runner.invoke(root, ["admin", "rollout", "show", str(setup.rollout_id), "-o", "json"])
    assert as_json.exit_code == 0, as_json.output
    doc = json.loads(as_json.output)
    assert doc["rollout"]["id"] == setup.rollout_id
    assert doc["evidence"]["state"] == "canary"
