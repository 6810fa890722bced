"""Request and response bodies of the threshold-sets API."""

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

Ratio = Field(ge=0.0, le=1.0)


class ThresholdValues(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min_acceptance_rate: float = Field(ge=0.0, le=1.0)
    min_mean_acceptance_length: float = Field(ge=0.0, le=64.0)
    min_speedup: float = Field(gt=0.0, le=100.0)
    max_kv_cache_usage: float = Field(gt=0.0, le=1.0)
    min_samples: int = Field(ge=1, le=10_000_000)
    stage_dwell_seconds: int = Field(ge=0, le=30 * 86400)
    guard_dwell_seconds: int = Field(ge=0, le=30 * 86400)
    probation_percentage: float = Field(gt=0.0, le=100.0)
    cooldown_seconds: int = Field(ge=0, le=30 * 86400)
    memory_pressure_beats: int = Field(default=3, ge=1, le=1000)
    draft_unavailable_seconds: int = Field(default=60, ge=1, le=86400)
    max_inconclusive_rounds: int = Field(default=5, ge=1, le=1000)
    error_rate_alpha: float = Field(default=0.01, gt=0.0, lt=1.0)
    sprt_alpha: float = Field(default=0.05, gt=0.0, lt=0.5)
    sprt_beta: float = Field(default=0.05, gt=0.0, lt=0.5)


class ThresholdSetCreate(ThresholdValues):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class ThresholdSetChange(BaseModel):
    """Any subset of the values; the rest is copied from the version changed."""

    model_config = ConfigDict(extra="forbid")

    min_acceptance_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    min_mean_acceptance_length: float | None = Field(default=None, ge=0.0, le=64.0)
    min_speedup: float | None = Field(default=None, gt=0.0, le=100.0)
    max_kv_cache_usage: float | None = Field(default=None, gt=0.0, le=1.0)
    min_samples: int | None = Field(default=None, ge=1, le=10_000_000)
    stage_dwell_seconds: int | None = Field(default=None, ge=0, le=30 * 86400)
    guard_dwell_seconds: int | None = Field(default=None, ge=0, le=30 * 86400)
    probation_percentage: float | None = Field(default=None, gt=0.0, le=100.0)
    cooldown_seconds: int | None = Field(default=None, ge=0, le=30 * 86400)
    memory_pressure_beats: int | None = Field(default=None, ge=1, le=1000)
    draft_unavailable_seconds: int | None = Field(default=None, ge=1, le=86400)
    max_inconclusive_rounds: int | None = Field(default=None, ge=1, le=1000)
    error_rate_alpha: float | None = Field(default=None, gt=0.0, lt=1.0)
    sprt_alpha: float | None = Field(default=None, gt=0.0, lt=0.5)
    sprt_beta: float | None = Field(default=None, gt=0.0, lt=0.5)


class ThresholdSet(ThresholdValues):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    version: int
    created_at: datetime
