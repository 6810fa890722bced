"""Canary evaluation through a real Celery worker: promotion walk, pause, rollback."""

from control.automation.celery_app import AutomationCelery
from control.db import Database
from tests.control.automation import scenario as sc


def test_good_canary_walks_its_stages_to_full(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    walked: list[tuple[str, float]] = []
    fed: list[list[int]] = []
    for _ in range(4):
        fed.append(sc.good_traffic(committed_database, setup))
        result = sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)
        assert result["action"] == "promote", result
        row = sc.rollout(committed_database, setup.rollout_id)
        walked.append((row.state, row.percentage))
    assert walked == [("ramping", 5.0), ("ramping", 25.0), ("ramping", 50.0), ("full", 100.0)]

    promotions = [
        d for d in sc.decisions(committed_database, setup.rollout_id) if d.actor == "automation"
    ]
    assert [d.kind for d in promotions] == ["canary_promote"] * 4
    for decision, window_ids in zip(promotions, fed, strict=True):
        # Each stage is judged on the windows since it began, and says which.
        assert decision.evidence["window_ids"] == sorted(window_ids)
        assert decision.evidence["threshold_set"]["id"] == setup.threshold_set_id
        assert decision.evidence["threshold_set"]["version"] == 1
        assert decision.task_id is not None and decision.evidence["task_id"] == decision.task_id
        stats = decision.evidence["statistics"]
        assert stats["sprt"]["decision"] == "accept"
        assert stats["tpot"]["speedup"]["lower"] >= 1.1
    final = promotions[-1]
    assert final.to_state == "full" and final.record_markdown is not None
    for section in (
        "## Context",
        "## Alternatives considered",
        "## Evidence",
        "## Assumptions",
        "## Selected policy",
        "## Reversal trigger",
        "## Open risks",
    ):
        assert section in final.record_markdown
    assert "TPOT speedup" in final.record_markdown
    assert all(d.record_markdown is None for d in promotions[:-1] if d.to_state != "full")
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
    outcomes = []
    for _ in range(3):
        # Acceptance is fine but the arms are equally fast: the speedup CI straddles 1.
        sc.feed(committed_database, setup, spec_alpha=0.8, spec_tpot_ms=20.0, baseline_tpot_ms=20.0)
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
    assert [d.kind for d in auto] == ["hold", "hold", "canary_pause"]
    assert auto[-1].evidence["verdict"]["checks"]["speedup_ci"] is False
    assert auto[-1].evidence["verdict"]["checks"]["sprt_accepts"] is True
    actions = sc.audit_actions(committed_database, setup.rollout_id)
    assert actions.count(("automation", "rollout.hold")) == 2
    assert ("automation", "rollout.pause") in actions
    # Paused rollouts are left to an admin.
    assert sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)["action"] == "wait"


def test_regressed_canary_rolls_back(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    sc.feed(
        committed_database,
        setup,
        spec_alpha=0.8,
        spec_tpot_ms=10.0,
        baseline_tpot_ms=20.0,
        spec_errors=20,
    )
    result = sc.run_task(automation_app, "evaluate_canary", setup.rollout_id)
    assert result["action"] == "rollback" and "error rate" in result["reason"]
    row = sc.rollout(committed_database, setup.rollout_id)
    assert (row.state, row.percentage) == ("rolled_back", 0.0)
    decision = sc.decisions(committed_database, setup.rollout_id)[-1]
    assert decision.evidence["statistics"]["error_rate"]["worse"] is True
