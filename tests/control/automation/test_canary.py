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
