"""What an engine launcher needs to start a pool's workers (GET /internal/v1/pools/{id}/spec)."""

import json
from typing import Any

from pydantic import BaseModel, Field

from specwire.snapshot import PairVersionSpec


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


def lora_module_names(engine_args: dict[str, Any]) -> list[str]:
    """Adapter names in a pool's `lora-modules` engine argument (vLLM's `name=path` or
    JSON `{"name": ..., "path": ...}` forms); unreadable entries are skipped."""
    raw = engine_args.get("lora-modules", engine_args.get("lora_modules"))
    items = [raw] if isinstance(raw, str) else list(raw or [])
    names: list[str] = []
    for item in items:
        if isinstance(item, dict):
            name = item.get("name")
        elif isinstance(item, str) and item.lstrip().startswith("{"):
            try:
                name = json.loads(item).get("name")
            except (ValueError, AttributeError):
                name = None
        elif isinstance(item, str) and "=" in item:
            name = item.split("=", 1)[0].strip()
        else:
            name = None
        if isinstance(name, str) and name and name not in names:
            names.append(name)
    return names
