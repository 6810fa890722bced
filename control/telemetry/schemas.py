"""What the telemetry reads serve beyond the stored windows themselves."""

from datetime import datetime

from pydantic import BaseModel, Field

from specwire import POSITION_LABELS
from specwire.telemetry import UNKNOWN


class PositionAcceptance(BaseModel):
    """Draft acceptance in one response-position bucket, summed over windows."""

    bucket: str = Field(
        description="Where in the response (0-based token index) the verify steps began: "
        f"{', '.join(POSITION_LABELS)}, or {UNKNOWN} (no per-step arrays, or a window "
        "from a gateway that sent no buckets)."
    )
    drafted_tokens: int = Field(ge=0, description="Draft tokens proposed in the bucket.")
    accepted_tokens: int = Field(ge=0, description="Of those, the tokens the target accepted.")
    acceptance_rate: float | None = Field(
        description="accepted_tokens / drafted_tokens; None when nothing was drafted."
    )


class WindowAcceptance(BaseModel):
    """Draft acceptance summed over one segment's stored windows in a time range (or
    over the windows of requests that matched no segment)."""

    segment_id: int | None = Field(
        description="The segment asked for; None: the windows of requests that matched "
        "no segment (unsegmented=true)."
    )
    pool_id: int | None = Field(description="The pool asked for; None: every pool.")
    pair_version_id: int | None = Field(
        description="The pair version asked for, or the pool's: the windows' key "
        "(windows carry the pair version, not the pool); None: every pair version."
    )
    arm: str | None = Field(description="spec or baseline; None: both arms.")
    since: datetime = Field(description="Windows starting at or after this (UTC).")
    until: datetime = Field(description="Windows starting before this (UTC), as asked.")
    read_until: datetime = Field(
        description="Windows starting before this were summed: `until`, or, when the "
        "window cap truncated the read, the start of the first window left out (ask "
        "again with since=read_until for the rest)."
    )
    truncated: bool = Field(description="More windows matched than `max_windows`.")
    max_windows: int = Field(description="The most windows one call sums.")
    windows: int = Field(ge=0, description="Windows summed.")
    requests: int = Field(ge=0)
    drafts: int = Field(ge=0, description="Speculation steps (verify passes with a draft).")
    drafted_tokens: int = Field(ge=0)
    accepted_tokens: int = Field(ge=0)
    acceptance_rate: float | None = Field(
        description="accepted_tokens / drafted_tokens; None when nothing was drafted."
    )
    accepted_per_position: list[int] = Field(
        description="Accepted at draft position j, summed over the windows."
    )
    per_position_rate: list[float] = Field(
        description="accepted_per_position[j] / drafts; empty without drafts."
    )
    acceptance_by_response_position: list[PositionAcceptance] = Field(
        description="Per response-position bucket, every bucket listed; they add up to "
        "drafted_tokens and accepted_tokens."
    )
