"""Architectures of the bundled pair: a Llama target and a 2-layer Llama draft.

head_dim is 64 because vLLM's CPU attention supports only 32/64/128. The draft
is as narrow as it can be while still tracking the target: speculation pays in
proportion to how much cheaper a draft step is than a target step. Two
layers, not one: a second attention layer lets the draft copy from its
context (identifiers, indentation), which is most of what it must agree on
with the target at temperature 0 on code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

HEAD_DIM = 64


@dataclass(frozen=True)
class ModelShape:
    hidden_size: int
    num_hidden_layers: int
    intermediate_size: int

    @property
    def num_attention_heads(self) -> int:
        assert self.hidden_size % HEAD_DIM == 0, "hidden_size must be a multiple of head_dim"
        return self.hidden_size // HEAD_DIM

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "num_attention_heads": self.num_attention_heads}


TARGET_SHAPE = ModelShape(hidden_size=256, num_hidden_layers=4, intermediate_size=768)
DRAFT_SHAPE = ModelShape(hidden_size=128, num_hidden_layers=2, intermediate_size=384)
VOCAB_SIZE = 4096
MAX_POSITIONS = 1024


def llama_config_kwargs(
    shape: ModelShape, vocab_size: int, max_positions: int, eos_id: int
) -> dict[str, Any]:
    """Keyword arguments for ``transformers.LlamaConfig`` (kept torch-free)."""
    return {
        "vocab_size": vocab_size,
        "hidden_size": shape.hidden_size,
        "intermediate_size": shape.intermediate_size,
        "num_hidden_layers": shape.num_hidden_layers,
        "num_attention_heads": shape.num_attention_heads,
        "num_key_value_heads": shape.num_attention_heads,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": max_positions,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        # NOTE: tied embeddings halve the vocab-sized weights, which dominate at this scale.
        "tie_word_embeddings": True,
        "bos_token_id": eos_id,
        "eos_token_id": eos_id,
        "pad_token_id": eos_id,
    }
