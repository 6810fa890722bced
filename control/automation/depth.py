"""Depth advice: the best speculative length from per-position acceptance and the cost
ratio implied by the load-matched speedup of this stage; stored as a
DepthRecommendation and audited, never flipped (`pipeline.Job.DEPTH`).
"""

from datetime import datetime

from sqlalchemy.orm import Session

from control.audit.service import record_audit
from control.automation import repository
from control.automation.evidence import json_safe
from control.automation.flips import AUTOMATION_ACTOR, Outcome
from control.automation.gather import gather_evidence
from control.automation.health import spec_pool_health
from control.automation.verdicts import Action
from control.models import DepthRecommendation, Rollout
from control.settings import ControlSettings
from control.stats import StatsError, advise_depth, cost_ratio_from_speedup, expected_speedup


def advise(
    session: Session,
    rollout: Rollout,
    settings: ControlSettings,
    now: datetime,
    task_id: str | None,
) -> Outcome:
    """Gather the evidence, advise a length, store it (once per task id)."""
    if task_id is not None and repository.recommendation_for_task(session, rollout.id, task_id):
        return Outcome(rollout.id, "recommend", "already advised by this task", replayed=True)
    health = spec_pool_health(session, rollout, settings, now)
    evidence = gather_evidence(
        session, rollout, settings, until=now, spec_workers=health.healthy_workers
    )
    acceptance = evidence.acceptance
    measured = evidence.stage.get("e2e_per_token")
    if acceptance is None or measured is None or acceptance.mean_acceptance_length is None:
        return Outcome(rollout.id, Action.WAIT.value, "; ".join(evidence.missing))
    current_k = rollout.pair_version.num_speculative_tokens
    try:
        cost_ratio = cost_ratio_from_speedup(
            measured.speedup, acceptance.mean_acceptance_length, current_k
        )
        advice = advise_depth(
            acceptance, cost_ratio, max(settings.automation.depth_max_k, current_k)
        )
        current = expected_speedup(
            acceptance.conditional_rates, current_k, cost_ratio, fill_rate=acceptance.alpha
        )
    except StatsError as exc:
        return Outcome(rollout.id, Action.WAIT.value, f"depth advice: {exc}")
    recommendation = DepthRecommendation(
        rollout_id=rollout.id,
        pair_version_id=rollout.pair_version_id,
        current_k=current_k,
        recommended_k=advice.best_k,
        expected_speedup_current=current,
        expected_speedup_recommended=advice.best_expected_speedup,
        evidence=json_safe(
            {
                "advice": advice.model_dump(mode="json"),
                "measured_speedup": measured.model_dump(mode="json"),
                "acceptance": acceptance.model_dump(mode="json"),
                "window_ids": evidence.spec.window_ids,
                "threshold_set": evidence.thresholds.model_dump(mode="json"),
                "task_id": task_id,
                "actor": AUTOMATION_ACTOR,
            }
        ),
        task_id=task_id,
    )
    session.add(recommendation)
    session.flush()
    record_audit(
        session,
        actor=AUTOMATION_ACTOR,
        action="depth.recommend",
        entity_type="rollout",
        entity_id=rollout.id,
        after={
            "recommendation_id": recommendation.id,
            "current_k": current_k,
            "recommended_k": advice.best_k,
        },
        reason=(
            f"cost ratio {cost_ratio:.3f} from the load-matched speedup in end-to-end "
            "time per token"
        ),
    )
    return Outcome(
        rollout.id,
        "recommend",
        f"k={advice.best_k} (expected speedup {advice.best_expected_speedup:.3f} vs "
        f"{current:.3f} at k={current_k})",
    )
