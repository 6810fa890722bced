"""Guards and probation through a real Celery worker."""

import math
import time

from control.automation.celery_app import AutomationCelery
from control.automation.evidence import sprt_config
from control.db import Database
from control.models import ThresholdSet
from control.settings import ControlSettings
from control.stats import AcceptanceCounts, SprtDecision, sprt_test, wald_expected_trials
from tests.control.automation import scenario as sc


def test_low_acceptance_segment_is_disabled_within_the_expected_windows(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    # A healthy spec worker, so only acceptance can trip a guard here.
    sc.heartbeat(committed_database, setup, "spec-w1")
    alpha, requests, drafts_per_request = 0.45, 5, 4
    counters = sc.spec_counters(alpha, requests * drafts_per_request)
    per_window = AcceptanceCounts(
        drafts=counters["drafts"],
        drafted_tokens=counters["drafted_tokens"],
        accepted_tokens=counters["accepted_tokens"],
        accepted_per_position=tuple(counters["accepted_per_position"]),
    )
    trials_per_window = per_window.position_trials
    assert trials_per_window is not None
    config = sprt_config(ThresholdSet(**sc.THRESHOLDS), ControlSettings())
    # Wald's expected sample size at the true rate, and never before min_trials.
    expected_windows = math.ceil(
        max(config.min_trials, wald_expected_trials(config, alpha)) / trials_per_window
    )

    disabled_after: int | None = None
    for window in range(1, 3 * expected_windows + 1):
        sc.feed(
            committed_database,
            setup,
            spec_alpha=alpha,
            spec_tpot_ms=15.0,
            baseline_tpot_ms=15.0,
            requests=requests,
            drafts_per_request=drafts_per_request,
        )
        result = sc.run_task(automation_app, "guard_rollout", setup.rollout_id)
        cumulative = sprt_test(
            per_window.accepted_tokens * window, trials_per_window * window, config
        )
        if result["action"] == "disable":
            disabled_after = window
            # Disabled exactly when the cumulative SPRT first rejects.
            assert cumulative.decision is SprtDecision.REJECT
            break
        assert cumulative.decision is not SprtDecision.REJECT
    assert disabled_after is not None
    assert disabled_after <= expected_windows + 1

    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage, row.disable_count) == ("disabled", 0.0, 1)
    assert row.disabled_reason == "low_acceptance"
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert decision.kind == "guard_low_acceptance" and decision.actor == "automation"
    assert decision.evidence["statistics"]["sprt"]["decision"] == "reject"
    assert len(decision.evidence["window_ids"]) == 2 * disabled_after
    assert decision.record_markdown is not None
    assert "sustained low acceptance" in decision.record_markdown
    assert ("automation", "rollout.disable") in sc.audit_actions(
        committed_database, setup.rollout_id
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
        "canary_failed",
    )
    # Second disable: the cool-down is 2 s now, so 1.1 s is not enough.
    time.sleep(1.1)
    assert sc.run_task(automation_app, "probation_rollout", setup.rollout_id)["action"] == "wait"
    time.sleep(1.0)
    assert sc.run_task(automation_app, "probation_rollout", setup.rollout_id)["action"] == "enable"
