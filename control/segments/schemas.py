"""Request and response bodies of the segments API."""

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from specwire import DEFAULT_TPOT_SLO_S, DEFAULT_TTFT_SLO_S, SegmentSelector, slo_edge

_EVAL_SET = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_EVAL_SET_OR_EMPTY = r"^([A-Za-z0-9][A-Za-z0-9._-]*)?$"

# A latency SLO target: 95 % of the segment's requests within it, in seconds; an edge
# of the gateway's latency histogram (0.1, 0.158, 0.251, 0.398, 0.631, 1.0, ... s).
SloSeconds = Annotated[float, Field(gt=0, le=100), AfterValidator(slo_edge)]
_TTFT = "TTFT p95 SLO target in seconds (an edge of the gateway's latency buckets)."
_TPOT = "TPOT p95 SLO target in seconds (an edge of the gateway's latency buckets)."


class SegmentCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = Field(default="", max_length=500)
    selector: SegmentSelector
    priority: int = Field(
        default=0,
        ge=-1_000_000,
        le=1_000_000,
        description="Higher wins when selectors overlap; ties go to the lower id.",
    )
    eval_set: str | None = Field(
        default=None,
        max_length=100,
        pattern=_EVAL_SET,
        description="Eval set (name; its latest version) an offline evaluation must use "
        "before a rollout on this segment may start.",
    )
    ttft_slo_p95_s: SloSeconds = Field(default=DEFAULT_TTFT_SLO_S, description=_TTFT)
    tpot_slo_p95_s: SloSeconds = Field(default=DEFAULT_TPOT_SLO_S, description=_TPOT)


class SegmentUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str | None = Field(default=None, max_length=500)
    selector: SegmentSelector | None = None
    priority: int | None = Field(default=None, ge=-1_000_000, le=1_000_000)
    eval_set: str | None = Field(
        default=None,
        max_length=100,
        pattern=_EVAL_SET_OR_EMPTY,
        description="Eval set name; an empty string clears it.",
    )
    ttft_slo_p95_s: SloSeconds | None = Field(default=None, description=_TTFT)
    tpot_slo_p95_s: SloSeconds | None = Field(default=None, description=_TPOT)


class Segment(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    description: str
    selector: SegmentSelector
    priority: int
    eval_set: str | None
    ttft_slo_p95_s: float
    tpot_slo_p95_s: float
    version: int
    created_at: datetime
    updated_at: datetime
