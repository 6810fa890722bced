"""Which stage's load the promotion evidence must reach, and the spec arm's share.

Canary, ramping, probation: the next stage (full keeps the baseline holdout).
Shadow: the canary's first stage, from the share actually mirrored.
"""

from pydantic import BaseModel, ConfigDict

from control.models import Rollout, ThresholdSet
from control.rollouts.state_machine import canary_stage, next_stage
from specwire import RolloutState

# The stage whose load promotion evidence must reach (`NextStage.target`).
NEXT_STAGE = "next stage"
CANARY_FIRST_STAGE = "canary's first stage"


def holdout_share(thresholds: ThresholdSet) -> float:
    """The spec arm's share at `full`: everything but the baseline holdout."""
    return 100.0 - thresholds.holdout_percentage


def spec_share(rollout: Rollout) -> float:
    if rollout.state == RolloutState.FULL.value:
        return holdout_share(rollout.threshold_set)
    return rollout.percentage


class LoadPlan(BaseModel):
    """The spec arm's share now and at the stage judged for, and the segment's rate."""

    model_config = ConfigDict(frozen=True)

    target: str
    share_now: float
    share_next: float
    segment_rate_per_s: float


def load_plan(
    rollout: Rollout,
    thresholds: ThresholdSet,
    *,
    spec_requests: int,
    baseline_requests: int,
    seconds: float,
) -> LoadPlan:
    """Which stage's load the evidence must reach, from this stage's request counts.

    Canary, ramping, probation: the next stage (full keeps the holdout); both arms'
    requests are the segment's. Shadow: the canary's first stage; every request of the
    segment is served by the baseline arm, so its count alone is the segment's rate,
    and the share on the spec pool is what was mirrored (at most `shadow_percentage`,
    less when the gateways' in-flight cap skipped mirrors).
    """
    assert seconds > 0, seconds
    stages = list(rollout.stages)
    if rollout.state == RolloutState.SHADOW.value:
        mirrored = 100.0 * spec_requests / baseline_requests if baseline_requests else 0.0
        return LoadPlan(
            target=CANARY_FIRST_STAGE,
            share_now=min(rollout.percentage, mirrored),
            share_next=canary_stage(stages),
            segment_rate_per_s=baseline_requests / seconds,
        )
    share_next = next_stage(stages, rollout.percentage)
    if share_next >= 100.0:
        share_next = holdout_share(thresholds)
    return LoadPlan(
        target=NEXT_STAGE,
        share_now=spec_share(rollout),
        share_next=share_next,
        segment_rate_per_s=(spec_requests + baseline_requests) / seconds,
    )
