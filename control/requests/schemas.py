"""Response bodies of the request-record API."""

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from specwire import RequestRecordDoc


class RequestRecord(RequestRecordDoc):
    """One request as the gateway recorded it (no prompt or completion text)."""

    model_config = ConfigDict(from_attributes=True)

    id: int
    gateway_id: str = Field(description="The gateway process that served the request.")
    stored_at: datetime


class AdapterAcceptanceOut(BaseModel):
    """Measured acceptance of one LoRA adapter (null: the base model) on one pair version,
    over the request records received in the window."""

    model_config = ConfigDict(from_attributes=True)

    adapter: str | None = Field(description="The adapter requests named; null: the base model.")
    pair_version_id: int | None = Field(description="Pair version the records carry.")
    pair: str | None = Field(description="Pair version label.")
    requests: int = Field(description="Records in the window.")
    spec_requests: int = Field(description="Of them, served by the spec arm.")
    drafts: int = Field(description="Speculation steps the engines reported.")
    drafted_tokens: int
    accepted_tokens: int
    accepted_per_position: list[int] = Field(description="Accepted at draft position j, summed.")
    acceptance_rate: float | None = Field(description="accepted / drafted tokens; null: no draft.")
    mean_acceptance_length: float | None = Field(
        description="1 + accepted / drafts: tokens per target step; null without drafts."
    )
    per_position_rate: list[float] = Field(description="accepted at position j / drafts.")


class AdapterAcceptanceList(BaseModel):
    since: datetime
    until: datetime | None
    items: list[AdapterAcceptanceOut]
