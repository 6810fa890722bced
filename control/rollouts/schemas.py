"""Request and response bodies of the rollouts API."""

from datetime import datetime
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from control.ids import DbId
from control.rollouts.gates import StageGate
from control.rollouts.state_machine import RolloutAction
from specwire import RolloutState


def _check_stages(stages: list[float]) -> list[float]:
    if any(not 0.0 < s <= 100.0 for s in stages):
        raise ValueError("every stage is a percentage in (0, 100]")
    if stages != sorted(set(stages)):
        raise ValueError("stages must be strictly increasing")
    return stages


class RolloutCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    segment_id: DbId
    pair_version_id: DbId
    spec_pool_id: DbId
    baseline_pool_id: DbId
    threshold_set_id: DbId
    stages: list[float] = Field(default=[1.0, 5.0, 25.0, 50.0, 100.0], min_length=1, max_length=20)

    _stages = field_validator("stages")(_check_stages)


class DepthRungIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pool_id: DbId
    max_load: float | None = Field(default=None, gt=0.0, le=10_000.0)


class DepthLadderIn(BaseModel):
    """Spec pools deepest first; each rung's max_load (per-worker requests in flight)
    above the previous one's; the last rung has none."""

    model_config = ConfigDict(extra="forbid")

    rungs: list[DepthRungIn] = Field(min_length=2, max_length=8)
    hysteresis: float = Field(default=0.5, ge=0.0, le=1000.0)
    min_dwell_s: float = Field(default=5.0, ge=0.0, le=3600.0)
    load_smoothing_s: float = Field(default=2.0, ge=0.0, le=600.0)
    acceptance_reset: float = Field(default=0.15, gt=0.0, le=1.0)

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        bounds = [r.max_load for r in self.rungs]
        if bounds[-1] is not None or any(b is None for b in bounds[:-1]):
            raise ValueError("every rung but the last has a max_load; the last has none")
        inner = [b for b in bounds[:-1] if b is not None]
        if inner != sorted(set(inner)):
            raise ValueError("max_load must increase strictly along the rungs")
        if len({r.pool_id for r in self.rungs}) != len(self.rungs):
            raise ValueError("each pool appears once")
        return self


class RolloutUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stages: list[float] | None = Field(default=None, min_length=1, max_length=20)
    threshold_set_id: DbId | None = None
    depth_ladder: DepthLadderIn | None = Field(
        default=None, description="Set the depth ladder; an explicit null removes it."
    )

    @field_validator("stages")
    @classmethod
    def _stages(cls, v: list[float] | None) -> list[float] | None:
        return None if v is None else _check_stages(v)


class RolloutActionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=1000)
    waive: list[StageGate] = Field(
        default_factory=list,
        max_length=2,
        description="start only: evidence to go without (offline_evaluation, shadow), "
        "recorded on the decision and audited; needs a reason. A waived shadow starts the "
        "canary directly.",
    )

    @model_validator(mode="after")
    def _waiver_has_reason(self) -> Self:
        if self.waive and not (self.reason and self.reason.strip()):
            raise ValueError("waiving evidence needs a reason")
        return self


class Rollout(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    segment_id: DbId
    pair_version_id: DbId
    spec_pool_id: DbId
    baseline_pool_id: DbId
    threshold_set_id: DbId
    stages: list[float]
    state: RolloutState
    paused_from: RolloutState | None
    percentage: float
    cohort_salt: str
    version: int
    state_entered_at: datetime
    disable_count: int
    disabled_reason: str | None
    depth_ladder: dict[str, Any] | None = None
    created_at: datetime
    updated_at: datetime
    allowed_actions: list[RolloutAction] = Field(default_factory=list)

    @classmethod
    def of(cls, row: Any) -> "Rollout":
        from control.rollouts.state_machine import allowed_actions

        out = cls.model_validate(row)
        out.allowed_actions = allowed_actions(RolloutState(row.state))
        return out
