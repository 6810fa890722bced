"""Request and response bodies of the segments API."""

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from control.contract import SegmentSelector

_EVAL_SET = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_EVAL_SET_OR_EMPTY = r"^([A-Za-z0-9][A-Za-z0-9._-]*)?$"


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


class Segment(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    description: str
    selector: SegmentSelector
    priority: int
    eval_set: str | None
    version: int
    created_at: datetime
    updated_at: datetime
