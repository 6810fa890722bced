"""Depth advice through a real Celery worker."""

from sqlalchemy import select

from control.automation.celery_app import AutomationCelery
from control.db import Database
from control.models import DepthRecommendation, TelemetryWindowRow
from control.stats import advise_depth, cost_ratio_from_speedup, estimate_acceptance
from tests.control.automation import scenario as sc


def test_depth_advice_records_the_best_k(
    automation_app: AutomationCelery, committed_database: Database
) -> None:
    setup = sc.create_rollout(committed_database)
    window_ids = sc.good_traffic(committed_database, setup)
    result = sc.run_task(automation_app, "advise_depth", setup.rollout_id)
    assert result["action"] == "recommend", result

    with committed_database.session() as s:
        rec = s.scalars(
            select(DepthRecommendation).where(DepthRecommendation.rollout_id == setup.rollout_id)
        ).one()
        spec_window = s.get(TelemetryWindowRow, min(window_ids))
        assert spec_window is not None and spec_window.arm == "spec"
        acceptance = estimate_acceptance(spec_window)  # the counters the window carried
        measured = rec.evidence["measured_speedup"]["speedup"]
        cost = cost_ratio_from_speedup(measured, acceptance.mean_acceptance_length or 1.0, sc.K)
        expected = advise_depth(acceptance, cost, 8)
        assert rec.current_k == sc.K
        assert rec.recommended_k == expected.best_k
        assert abs(rec.expected_speedup_recommended - expected.best_expected_speedup) < 1e-9
        assert rec.evidence["window_ids"] == [min(window_ids)]  # the spec window only
        assert rec.task_id is not None
    # About 2 (10 ms vs 20 ms per token; TTFT is the same 120 ms on both arms).
    assert 1.5 < measured < 2.2
