"""What an engine launcher needs to start a pool's workers (GET /internal/v1/pools/{id}/spec)."""

from typing import Any

from pydantic import BaseModel, Field

from control.contract.snapshot import PairVersionSpec


class SpeculativeConfig(BaseModel):
    """Mirrors vLLM's --speculative-config JSON."""

    method: str
    model: str | None = None
    num_speculative_tokens: int = Field(ge=1)
    draft_sample_method: str | None = None

    def to_vllm(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class PoolSpec(BaseModel):
    id: int
    name: str
    served_model_name: str
    target_ref: str = Field(description="Local path of the target model directory.")
    pair_version: PairVersionSpec | None = None
    speculative_config: SpeculativeConfig | None = None
    engine_args: dict[str, Any] = Field(
        default_factory=dict, description="Extra vLLM server flags, e.g. {'max-model-len': 512}."
    )
    desired_workers: int = Field(default=1, ge=0)
