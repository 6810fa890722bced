"""Normalized request features and the segment selector that matches them.

The matching rule lives here, next to the data, so that the control plane
(validating and previewing segments) and the gateway (routing) agree exactly.
"""

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Arm(StrEnum):
    SPEC = "spec"
    BASELINE = "baseline"


class RequestFeatures(BaseModel):
    """What the gateway extracts from a request before deciding. No text."""

    model_config = ConfigDict(frozen=True)

    tenant: str = Field(description="Tenant name of the caller's key.")
    task: str | None = Field(default=None, description="Task/route tag (header or endpoint).")
    model: str = Field(description="Requested model name.")
    adapter: str | None = Field(default=None, description="LoRA adapter id, if any.")
    temperature: float = Field(ge=0.0, description="Effective sampling temperature.")
    structured_output: bool = Field(default=False, description="JSON schema / grammar asked.")
    max_tokens: int | None = Field(default=None, ge=1, description="Requested max tokens.")


class SegmentSelector(BaseModel):
    """A conjunction of optional conditions; an absent condition matches anything.

    Ranges are half-open: ``min <= value < max``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenants: list[str] | None = None
    tasks: list[str] | None = None
    models: list[str] | None = None
    adapters: list[str] | None = None
    temperature_min: float | None = Field(default=None, ge=0.0)
    temperature_max: float | None = Field(default=None, ge=0.0)
    structured_output: bool | None = None
    max_tokens_min: int | None = Field(default=None, ge=0)
    max_tokens_max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _ranges_ordered(self) -> "SegmentSelector":
        for low, high, name in (
            (self.temperature_min, self.temperature_max, "temperature"),
            (self.max_tokens_min, self.max_tokens_max, "max_tokens"),
        ):
            if low is not None and high is not None and low >= high:
                raise ValueError(f"{name}_min must be below {name}_max")
        return self

    def matches(self, f: RequestFeatures) -> bool:
        if self.tenants is not None and f.tenant not in self.tenants:
            return False
        if self.tasks is not None and f.task not in self.tasks:
            return False
        if self.models is not None and f.model not in self.models:
            return False
        if self.adapters is not None and f.adapter not in self.adapters:
            return False
        if self.temperature_min is not None and f.temperature < self.temperature_min:
            return False
        if self.temperature_max is not None and f.temperature >= self.temperature_max:
            return False
        if self.structured_output is not None and f.structured_output != self.structured_output:
            return False
        if self.max_tokens_min is not None or self.max_tokens_max is not None:
            if f.max_tokens is None:
                return False
            if self.max_tokens_min is not None and f.max_tokens < self.max_tokens_min:
                return False
            if self.max_tokens_max is not None and f.max_tokens >= self.max_tokens_max:
                return False
        return True
