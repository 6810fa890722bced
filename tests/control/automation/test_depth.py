"""Depth advice through a real Celery worker."""

from sqlalchemy import select

from control.automation.celery_app import AutomationCelery
from control.db import Database
from control.models import DepthRecommendation
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
        counters = sc.spec_counters(0.8, 100 * 20)
        acceptance = estimate_acceptance(
            _Counts(**counters)  # the same counters the window carried
        )
        measured = rec.evidence["measured_tpot_speedup"]["speedup"]
        cost = cost_ratio_from_speedup(measured, acceptance.mean_acceptance_length or 1.0, sc.K)
        expected = advise_depth(acceptance, cost, 8)
        assert rec.current_k == sc.K
        assert rec.recommended_k == expected.best_k
        assert abs(rec.expected_speedup_recommended - expected.best_expected_speedup) < 1e-9
        assert rec.evidence["window_ids"] == [min(window_ids)]  # the spec window only
        assert rec.task_id is not None
    # About 2 (10 ms vs 20 ms), blurred by the 26 %-wide histogram buckets.
    assert 1.5 < measured < 3.0


class _Counts:
    def __init__(
        self,
        drafts: int,
        drafted_tokens: int,
        accepted_tokens: int,
        accepted_per_position: list[int],
    ) -> None:
        self.drafts = drafts
        self.drafted_tokens = drafted_tokens
        self.accepted_tokens = accepted_tokens
        self.accepted_per_position = accepted_per_position
