"""Canary evaluation through a real Celery worker: promotion walk, pause, rollback."""

from control.automation.celery_app import AutomationCelery
from control.db import Database
from control.decisions.record import SECTIONS
from tests.control.automation import scenario as sc


def test_good_canary_walks_its_stages_to_full(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    sc.idle_spec_pool(committed_database, setup)
    walked: list[tuple[str, float]] = []
    fed: list[int] = []
    for _ in range(4):
        fed.extend(sc.good_traffic(committed_database, setup))
        result = sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)
        assert result["action"] == "promote", result
        row = sc.rollout(committed_database, setup.rollout_id)
        walked.append((row.state, row.percentage))
    assert walked == [("ramping", 5.0), ("ramping", 25.0), ("ramping", 50.0), ("full", 100.0)]

    promotions = [
        d for d in sc.decisions(committed_database, setup.rollout_id) if d.actor == "automation"
    ]
    assert [d.kind for d in promotions] == ["canary_promote"] * 4
    for stage, decision in enumerate(promotions, start=1):
        # The monitors read every window since the exposure began, and say which.
        assert decision.evidence["window_ids"] == sorted(fed[: 2 * stage])
        assert decision.evidence["threshold_set"]["id"] == setup.threshold_set_id
        assert decision.evidence["threshold_set"]["version"] == 1
        assert decision.task_id is not None and decision.evidence["task_id"] == decision.task_id
        stats = decision.evidence["statistics"]
        assert stats["acceptance_monitor"]["decision"] == "accept"
        # 10 ms vs 20 ms per token: about 2x at matched load, with its always-valid bound.
        speedup = stats["next_stage"]["speedup"]
        assert 1.1 <= speedup["lower"] <= speedup["speedup"] <= speedup["upper"]
        assert 1.6 < speedup["speedup"] < 2.4
        assert stats["budget"]["false_alarm_rate"] == 0.01
        # A flip keeps the block estimates, enough to recompute every monitor.
        assert len(stats["blocks"]["latency"]) == stage
    final = promotions[-1]
    assert final.to_state == "full" and final.record_markdown is not None
    for section in SECTIONS:
        assert f"## {section}" in final.record_markdown
    assert "e2e_per_token at matched load: speedup" in final.record_markdown
    assert "10 % baseline holdout" in final.record_markdown
    # Every automated flip has its record, from the evidence its rule saw.
    for decision in promotions[:-1]:
        assert decision.record_markdown is not None
        assert decision.record_markdown.startswith("# Promote rollout")
        assert "at matched load: speedup" in decision.record_markdown
    assert (
        sc.audit_actions(committed_database, setup.rollout_id).count(
            ("automation", "rollout.promote")
        )
        == 4
    )


def test_inconclusive_canary_holds_then_pauses(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    sc.idle_spec_pool(committed_database, setup)
    outcomes = []
    for _ in range(3):
        # Acceptance is fine and the spec arm is exactly min_speedup (1.1x) faster: the
        # speedup's interval straddles the bar, so neither promotion nor "no benefit".
        sc.feed(
            committed_database, setup, spec_alpha=0.8, spec_tpot_ms=18.18, baseline_tpot_ms=20.0
        )
        outcomes.append(sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)["action"])
        if outcomes[-1] == "hold":
            assert sc.rollout(committed_database, setup.rollout_id).inconclusive_rounds == len(
                outcomes
            )
    assert outcomes == ["hold", "hold", "pause"]
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.paused_from, row.percentage) == ("paused", "canary", 1.0)
    assert row.inconclusive_rounds == 0
    auto = [
        d for d in sc.decisions(committed_database, setup.rollout_id) if d.actor == "automation"
    ]
    assert [d.kind for d in auto] == ["hold", "hold", "canary_inconclusive"]
    checks = auto[-1].evidence["verdict"]["checks"]
    assert checks["speedup_at_next_load"] is False
    assert checks["acceptance_accepted"] is True
    # Holds keep the summaries only; the counted rounds are on the record.
    assert "blocks" not in auto[0].evidence["statistics"]
    assert auto[1].evidence["inconclusive_rounds"] == 1
    actions = sc.audit_actions(committed_database, setup.rollout_id)
    assert actions.count(("automation", "rollout.hold")) == 2
    assert ("automation", "rollout.pause") in actions
    # Paused rollouts are left to an admin.
    assert sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)["action"] == "wait"


def test_canary_without_benefit_pauses_instead_of_rolling_back(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    # Identical arms: conclusively not min_speedup faster, and not slower either.
    outcomes = []
    for _ in range(3):
        sc.feed(committed_database, setup, spec_alpha=0.8, spec_tpot_ms=20.0, baseline_tpot_ms=20.0)
        outcomes.append(sc.run_task(automation_app, "evaluate_canary", setup.rollout_id))
        if outcomes[-1]["action"] != "hold":
            break
    assert outcomes[-1]["action"] == "pause", outcomes
    assert "no benefit at this stage's load" in outcomes[-1]["reason"]
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert decision.kind == "canary_no_benefit"
    upper = decision.evidence["statistics"]["stage"]["e2e_per_token"]["upper"]
    assert upper < 1.1


def test_canary_without_benefit_rolls_back_when_its_threshold_set_says_so(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    # Spec 8 % slower: inside the latency monitor's 10 % margin (no alarm), but
    # conclusively below min_speedup 1.0 at this stage's load.
    setup = sc.create_rollout(committed_database, min_speedup=1.0, no_benefit_action="rollback")
    outcomes = []
    for _ in range(4):
        sc.feed(committed_database, setup, spec_alpha=0.8, spec_tpot_ms=21.6, baseline_tpot_ms=20.0)
        outcomes.append(sc.run_task(automation_app, "evaluate_canary", setup.rollout_id))
        if outcomes[-1]["action"] != "hold":
            break
    assert outcomes[-1]["action"] == "rollback", outcomes
    assert "no benefit at this stage's load" in outcomes[-1]["reason"]
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert (decision.kind, decision.to_state) == ("canary_no_benefit", "rolled_back")
    assert decision.evidence["statistics"]["stage"]["e2e_per_token"]["upper"] < 1.0
    assert "no_benefit_action = pause" in (decision.record_markdown or "")
    assert ("automation", "rollout.rollback") in sc.audit_actions(
        committed_database, setup.rollout_id
    )


def test_regressed_canary_rolls_back(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    result: dict[str, object] = {}
    windows = 0
    while windows < 5:
        windows += 1
        sc.feed(
            committed_database,
            setup,
            spec_alpha=0.8,
            spec_tpot_ms=10.0,
            baseline_tpot_ms=20.0,
            spec_error_rate=0.5,
        )
        result = sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)
        if result["action"] != "hold":
            break
    # 50 % errors against none: the error monitor's CUSUM crosses within a few windows.
    assert result["action"] == "rollback" and "error rate" in str(result["reason"]), result
    assert windows <= 3
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage) == ("rolled_back", 0.0)
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert decision.kind == "canary_error_regression"
    guard = decision.evidence["statistics"]["error_guard"]
    assert guard["cusum"]["alarm"] is True
    assert guard["cusum"]["peak"] >= guard["cusum"]["threshold"]
    assert guard["spec_rate"] > 0.35 and guard["baseline_rate"] == 0.0
