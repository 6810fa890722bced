"""What the automation sees in a rollout right now, without acting on it.

The same evidence, monitors and rules the Celery jobs use (`pipeline.py`), run as a
dry run: the guards' verdict, the stage's verdict (promote / hold / pause /
roll back) with each promotion check and what blocks it, and the latest depth
advice. Nothing is written, so an operator can look as often as they like.
"""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from control.automation import repository
from control.automation.gather import gather_evidence
from control.automation.health import spec_pool_health
from control.automation.pipeline import STATES, Job, verdict_of
from control.automation.verdicts import Verdict, promotion_checks
from control.models import DepthRecommendation, Rollout, utcnow
from control.settings import ControlSettings
from control.telemetry.schemas import PositionAcceptance
from control.telemetry.service import response_positions_of
from specwire import RolloutState


class VerdictView(BaseModel):
    action: str = Field(description="wait, hold, promote, start, pause, rollback, disable.")
    reason: str
    code: str | None = None
    advice: str | None = None

    @classmethod
    def of(cls, verdict: Verdict) -> "VerdictView":
        return cls(
            action=verdict.action.value,
            reason=verdict.reason,
            code=None if verdict.code is None else str(verdict.code),
            advice=verdict.advice,
        )


class DepthAdvice(BaseModel):
    id: int
    created_at: datetime
    current_k: int
    recommended_k: int
    expected_speedup_current: float
    expected_speedup_recommended: float
    evidence: dict[str, Any]


class Readout(BaseModel):
    rollout_id: int
    state: str
    percentage: float
    version: int
    computed_at: datetime
    guards: VerdictView | None = Field(
        description="The guards' verdict now (exposing states only): memory, draft, "
        "saturation, then the acceptance, latency and error monitors."
    )
    stage: VerdictView | None = Field(
        description="The stage's verdict now: canary, ramping and probation are judged for "
        "promotion, shadow for its exit; other states are not evaluated."
    )
    promotion_checks: dict[str, bool]
    blocking: list[str] = Field(description="The promotion checks that fail now.")
    evidence: dict[str, Any] = Field(
        description="The Evidence the rules saw, as a decision row stores it (without the "
        "per-block estimates): arms, acceptance per position and its monitor, latency and "
        "error monitors, matched comparisons, next-stage projection, budget, window ids."
    )
    depth_advice: list[DepthAdvice] = Field(description="The latest depth advice, newest first.")
    acceptance_by_response_position: list[PositionAcceptance] = Field(
        default_factory=list,
        description="The spec arm's draft tokens and acceptance per response-position "
        "bucket (where in the response each verify step began), summed over the "
        "evidence's spec windows (evidence.spec.window_ids). Shown only: no rule reads it.",
    )


def readout(
    session: Session, rollout: Rollout, settings: ControlSettings, *, advice_limit: int = 5
) -> Readout:
    now = utcnow()
    state = RolloutState(rollout.state)
    health = spec_pool_health(session, rollout, settings, now)
    evidence = gather_evidence(
        session, rollout, settings, until=now, spec_workers=health.healthy_workers
    )
    thresholds = rollout.threshold_set
    guards = (
        verdict_of(Job.GUARD, rollout, evidence, health, now)
        if state in STATES[Job.GUARD]
        else None
    )
    stage: Verdict | None = None
    for job in (Job.CANARY, Job.SHADOW):
        if state in STATES[job]:
            stage = verdict_of(job, rollout, evidence, health, now)
    checks = promotion_checks(evidence, thresholds)
    advice = repository.latest_recommendations(session, rollout.id, advice_limit)
    return Readout(
        rollout_id=rollout.id,
        state=state.value,
        percentage=rollout.percentage,
        version=rollout.version,
        computed_at=now,
        guards=None if guards is None else VerdictView.of(guards),
        stage=None if stage is None else VerdictView.of(stage),
        promotion_checks=checks,
        blocking=[name for name, ok in checks.items() if not ok],
        evidence=evidence.as_json(with_blocks=False),
        depth_advice=[_advice(r) for r in advice],
        acceptance_by_response_position=response_positions_of(session, evidence.spec.window_ids),
    )


def _advice(row: DepthRecommendation) -> DepthAdvice:
    return DepthAdvice(
        id=row.id,
        created_at=row.created_at,
        current_k=row.current_k,
        recommended_k=row.recommended_k,
        expected_speedup_current=row.expected_speedup_current,
        expected_speedup_recommended=row.expected_speedup_recommended,
        evidence=row.evidence,
    )
