"""Guards and probation through a real Celery worker."""

import time
from datetime import UTC, datetime, timedelta

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import select

from control.app import create_app
from control.automation.budget import sprt_config
from control.automation.celery_app import AutomationCelery
from control.automation.dispatch import GuardDispatch
from control.automation.health import spec_pool_health
from control.clock import use_clock
from control.db import Database
from control.models import Rollout, TelemetryWindowRow, ThresholdSet
from control.settings import ControlSettings
from control.stats import AcceptanceMonitor, SprtDecision, build_panel, monitor_acceptance
from control.stats.panel import window_arrays
from control.workers.service import sweep_stale_workers
from tests.control.automation import scenario as sc


def test_low_acceptance_canary_is_rolled_back_when_its_monitor_first_rejects(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    # A healthy spec worker, so only acceptance can trip a guard here.
    sc.heartbeat(committed_database, setup, "spec-w1")
    thresholds = sc.threshold_row()
    config = sprt_config(thresholds)
    assert (config.unacceptable_rate, config.acceptable_rate) == (0.6, 0.7)

    rolled_back_after: int | None = None
    windows: list[int] = []
    for window in range(1, 21):
        # Acceptance 0.45 against a minimum of 0.6; equal latency, so only the acceptance
        # monitor can fire. 5 requests per window: the request, not the position, is the unit.
        windows.extend(
            sc.feed(
                committed_database,
                setup,
                spec_alpha=0.45,
                spec_tpot_ms=15.0,
                baseline_tpot_ms=15.0,
                requests=5,
            )
        )
        result = sc.run_task(automation_app, "guard_rollout", setup.rollout_id)
        # The same statistic, computed here from the stored windows of the spec arm.
        reference = _acceptance_monitor(committed_database, setup, thresholds)
        if result["action"] == "rollback":
            rolled_back_after = window
            assert reference.decision is SprtDecision.REJECT
            break
        assert reference.decision is not SprtDecision.REJECT
    assert rolled_back_after is not None

    # A canary that fails a monitor is rolled back (full and probation are disabled).
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage, row.disable_count) == ("rolled_back", 0.0, 0)
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert decision.kind == "guard_low_acceptance" and decision.actor == "automation"
    monitor = decision.evidence["statistics"]["acceptance_monitor"]
    assert monitor["decision"] == "reject"
    assert monitor["design_effect"] >= 1.0
    # Trials are requests, not positions: the effective positions are fewer than judged.
    assert monitor["effective_positions"] <= monitor["judged_positions"]
    assert decision.evidence["window_ids"] == sorted(windows)
    assert "the CUSUM of the SPRT" in decision.evidence["verdict"]["reason"]
    # The rollback has its record too, with the monitor's numbers.
    assert decision.record_markdown is not None
    assert decision.record_markdown.startswith("# Rollback rollout")
    assert "Acceptance monitor reject" in decision.record_markdown
    assert ("automation", "rollout.rollback") in sc.audit_actions(
        committed_database, setup.rollout_id
    )


def _acceptance_monitor(
    database: Database, setup: sc.Setup, thresholds: ThresholdSet
) -> AcceptanceMonitor:
    with database.session() as s:
        rows = list(
            s.scalars(
                select(TelemetryWindowRow)
                .where(
                    TelemetryWindowRow.rollout_id == setup.rollout_id,
                    TelemetryWindowRow.arm == "spec",
                )
                .order_by(TelemetryWindowRow.window_start)
            )
        )
        parsed = [window_arrays(r) for r in rows]
    slots = {w.window_start: i for i, w in enumerate(parsed)}
    return monitor_acceptance(
        build_panel(slots, len(slots), parsed),
        sprt_config(thresholds),
        horizon_blocks=thresholds.false_alarm_horizon_windows,
        min_block_requests=thresholds.min_block_requests,
    )


def test_memory_pressure_disables_after_n_high_heartbeats(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    for beat in range(1, 4):
        sc.heartbeat(committed_database, setup, "spec-w1", kv_cache_usage=0.97)
        result = sc.run_task(automation_app, "guard_rollout", setup.rollout_id)
        if beat < 3:
            # Hysteresis: fewer than memory_pressure_beats consecutive beats never trip it.
            assert result["action"] == "wait", result
    assert result["action"] == "disable", result
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.disabled_reason) == ("disabled", "memory_pressure")
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert decision.evidence["spec_pool"]["pressured_workers"] == 1
    assert decision.evidence["spec_pool"]["max_kv_cache_usage"] == 0.97
    assert decision.record_markdown is not None and "memory pressure" in decision.record_markdown

    # Probation waits for the pool to calm down, even after the cool-down.
    time.sleep(1.1)
    assert sc.run_task(automation_app, "probation_rollout", setup.rollout_id)["action"] == "wait"
    sc.heartbeat(committed_database, setup, "spec-w1", kv_cache_usage=0.4)
    assert sc.run_task(automation_app, "probation_rollout", setup.rollout_id)["action"] == "enable"
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage) == ("probation", 2.0)


def test_draft_outage_disables_and_probation_reenables_after_recovery(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    sc.heartbeat(committed_database, setup, "spec-w1")
    assert sc.run_task(automation_app, "guard_rollout", setup.rollout_id)["action"] == "wait"

    sc.heartbeat(committed_database, setup, "spec-w1", draft_loaded=False)
    # Not yet: the outage must last draft_unavailable_seconds (1 s).
    assert sc.run_task(automation_app, "guard_rollout", setup.rollout_id)["action"] == "wait"
    time.sleep(1.1)
    sc.heartbeat(committed_database, setup, "spec-w1", draft_loaded=False)
    result = sc.run_task(automation_app, "run_guards")
    assert [r["action"] for r in result if r["rollout_id"] == setup.rollout_id] == ["disable"]
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.disabled_reason, row.disable_count) == (
        "disabled",
        "draft_unavailable",
        1,
    )

    # Cool-down (1 s × 2^0) elapsed but the draft is still missing: no probation.
    time.sleep(1.1)
    sweep = sc.run_task(automation_app, "probation_sweep")
    assert [r["action"] for r in sweep if r["rollout_id"] == setup.rollout_id] == ["wait"]
    sc.heartbeat(committed_database, setup, "spec-w1")
    sweep = sc.run_task(automation_app, "probation_sweep")
    assert [r["action"] for r in sweep if r["rollout_id"] == setup.rollout_id] == ["enable"]
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage) == ("probation", 2.0)

    # Judged again on probation: good evidence promotes it to the next stage.
    sc.good_traffic(committed_database, setup)
    assert sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)["action"] == "promote"
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage) == ("ramping", 5.0)
    kinds = [d.kind for d in sc.decisions(committed_database, setup.rollout_id)]
    assert kinds[-3:] == ["guard_draft_unavailable", "probation_enable", "canary_promote"]


def test_failed_probation_disables_again_with_a_doubled_cooldown(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    for _ in range(3):
        sc.heartbeat(committed_database, setup, "spec-w1", kv_cache_usage=0.97)
    assert sc.run_task(automation_app, "guard_rollout", setup.rollout_id)["action"] == "disable"
    sc.heartbeat(committed_database, setup, "spec-w1", kv_cache_usage=0.4)
    time.sleep(1.1)
    assert sc.run_task(automation_app, "probation_rollout", setup.rollout_id)["action"] == "enable"

    # On probation the spec arm is clearly slower: canary evaluation disables it again.
    sc.feed(committed_database, setup, spec_alpha=0.8, spec_tpot_ms=40.0, baseline_tpot_ms=20.0)
    assert sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)["action"] == "disable"
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.disable_count, row.disabled_reason) == (
        "disabled",
        2,
        "latency_regression",
    )
    # Second disable: the cool-down is 2 s now, so 1.1 s is not enough.
    time.sleep(1.1)
    assert sc.run_task(automation_app, "probation_rollout", setup.rollout_id)["action"] == "wait"
    time.sleep(1.0)
    assert sc.run_task(automation_app, "probation_rollout", setup.rollout_id)["action"] == "enable"


def test_a_regression_is_judged_as_soon_as_its_telemetry_lands(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    """No beat runs here: the telemetry endpoint itself sends the guard, after its commit."""
    settings = automation_app.specroute_settings
    setup = sc.create_rollout(committed_database)
    sc.heartbeat(committed_database, setup, "spec-w1")
    control = create_app(settings, committed_database)
    # The test worker listens on a queue of its own: send through its app.
    control.state.guard_dispatch = GuardDispatch(settings, app=automation_app)
    client = TestClient(control)
    token = settings.internal_secret()
    rng = np.random.default_rng(11)
    deadline = time.monotonic() + 30.0
    while sc.rollout(committed_database, setup.rollout_id).state == "canary":
        assert time.monotonic() < deadline, "the guard never ran"
        # The spec arm twice as slow per token as the baseline, at the same (idle) load.
        batch = sc.batch(setup, rng, spec_tpot_ms=40.0, baseline_tpot_ms=20.0)
        response = client.post(
            "/internal/v1/telemetry",
            content=batch.model_dump_json(),
            headers={"Authorization": f"Bearer {token}", "content-type": "application/json"},
        )
        assert response.status_code == 200 and response.json()["stored"] == 2
        time.sleep(0.5)
    row = sc.rollout(committed_database, setup.rollout_id)
    assert row.state == "rolled_back"
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert decision.kind == "guard_latency_regression"
    assert decision.task_id is not None


def test_a_draft_outage_is_timed_from_the_last_heartbeat_not_from_the_sweep(
    committed_database: Database,
) -> None:
    settings = ControlSettings(worker_stale_after_s=15.0)
    start = datetime(2030, 1, 1, tzinfo=UTC)
    now = start

    def clock() -> datetime:
        return now

    with use_clock(clock):
        setup = sc.create_rollout(committed_database)
        sc.heartbeat(committed_database, setup, "spec-w1")  # the worker's last beat
        # The staleness sweep only runs 100 s later (say control was busy or down).
        now = start + timedelta(seconds=100)
        with committed_database.session() as s:
            assert sweep_stale_workers(s, stale_after=timedelta(seconds=15), now=now) == ["spec-w1"]
        now = start + timedelta(seconds=110)
        with committed_database.session() as s:
            rollout = s.get(Rollout, setup.rollout_id)
            assert rollout is not None
            health = spec_pool_health(s, rollout, settings, now)
    assert not health.draft_available
    # 110 s since the last beat, not the 10 s since the sweep noticed.
    assert health.unavailable_seconds == 110.0


def test_a_spec_pool_with_no_worker_matching_the_pair_version_is_disabled(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)  # pair version: digest 0*64, engine 0.32.0
    # One worker on other weights, one on another engine: no worker matches.
    sc.heartbeat(committed_database, setup, "spec-digest", model_digest="f" * 64)
    sc.heartbeat(committed_database, setup, "spec-engine", engine_version="0.33.1")
    result = sc.run_task(automation_app, "guard_rollout", setup.rollout_id)
    assert result["action"] == "disable", result
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.disabled_reason) == ("disabled", "identity_mismatch")
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert decision.evidence["spec_pool"]["mismatched_workers"] == 2


def test_one_matching_worker_keeps_the_rollout_and_the_others_get_no_traffic(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    from control.settings import ControlSettings
    from control.snapshot.service import SnapshotService
    from specwire import PolicySnapshot

    setup = sc.create_rollout(committed_database)
    sc.heartbeat(committed_database, setup, "spec-bad", model_digest="f" * 64)
    # The same release under its distribution name, and the registered digest.
    sc.heartbeat(
        committed_database, setup, "spec-ok", engine_version="0.32.0+cpu", model_digest="0" * 64
    )
    result = sc.run_task(automation_app, "guard_rollout", setup.rollout_id)
    assert result["action"] != "disable", result
    with committed_database.session() as s:
        compiled = SnapshotService.from_settings(ControlSettings()).current(s)
    snapshot = PolicySnapshot.model_validate_json(compiled.body)
    spec_pool = next(p for p in snapshot.pools if p.id == setup.spec_pool_id)
    excluded = {w.id: w.excluded for w in spec_pool.workers}
    assert excluded == {"spec-bad": "model_digest_mismatch", "spec-ok": None}
    assert [w.id for w in spec_pool.healthy_workers()] == ["spec-ok"]
