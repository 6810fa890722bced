"""A cost-realistic target: the tiny target's exact distribution at a real model's cost.

The bundled target (4.5 M parameters, 18 MB in float32) fits in this machine's
last-level cache, so a decode step costs fixed overhead and compute, and
verifying k + 1 tokens costs nearly k + 1 single steps: speculation can barely
pay. Real deployments are the other way round: a step streams weights far
larger than any cache from memory, and k + 1 positions cost about one step.

This module derives such a target deterministically from the shipped weights:
the tiny target's layers unchanged, followed by `extra_layers` Llama decoder
blocks whose q/k/v and gate/up projections are seeded random matrices and whose
*output* projections (o_proj, down_proj) are exactly zero. A block adds
o_proj(attn(.)) and down_proj(mlp(.)) to the residual stream; with zero output
projections both are exactly 0.0, so the residual passes through bit for bit
and the logits equal the tiny target's. The engine still loads, streams and
multiplies every one of those weights (and keeps their KV cache) on every
step. Greedy equality with the tiny target is checked on a real vLLM server
(tests/engine/test_heavy_target.py).

NumPy and safetensors only: no torch, so it runs in the set-up step in seconds.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

DEFAULT_EXTRA_LAYERS = 40
SEED = 20261130
# Files copied unchanged from the tiny target (tokenizer, templates).
_COPIED = (
    "generation_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
)
STAMP = "heavy_target.json"


@dataclass(frozen=True)
class HeavyTarget:
    path: Path
    base_layers: int
    extra_layers: int
    parameters: int

    @property
    def layers(self) -> int:
        return self.base_layers + self.extra_layers


def _extra_block(
    rng: np.random.Generator, prefix: str, hidden: int, intermediate: int
) -> dict[str, np.ndarray]:
    def random(rows: int, cols: int) -> np.ndarray:
        # NOTE: the scale of a trained layer's inputs, so activations stay finite in fp16.
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    ones = np.ones(hidden, dtype=np.float16)
    return {
        f"{prefix}.input_layernorm.weight": ones,
        f"{prefix}.post_attention_layernorm.weight": ones.copy(),
        f"{prefix}.self_attn.q_proj.weight": random(hidden, hidden),
        f"{prefix}.self_attn.k_proj.weight": random(hidden, hidden),
        f"{prefix}.self_attn.v_proj.weight": random(hidden, hidden),
        # [hidden, hidden]: zero, so attention adds exactly 0.0 to the residual stream
        f"{prefix}.self_attn.o_proj.weight": np.zeros((hidden, hidden), dtype=np.float16),
        f"{prefix}.mlp.gate_proj.weight": random(intermediate, hidden),
        f"{prefix}.mlp.up_proj.weight": random(intermediate, hidden),
        # [hidden, intermediate]: zero, so the MLP adds exactly 0.0 as well
        f"{prefix}.mlp.down_proj.weight": np.zeros((hidden, intermediate), dtype=np.float16),
    }


def _source_digest(target_dir: Path) -> str:
    digest = hashlib.sha256()
    with (target_dir / "model.safetensors").open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def build_heavy_target(
    target_dir: Path, out_dir: Path, extra_layers: int = DEFAULT_EXTRA_LAYERS, seed: int = SEED
) -> HeavyTarget:
    """Write the cost-realistic target to `out_dir` (reused when already built the same way)."""
    assert extra_layers >= 0
    config = json.loads((target_dir / "config.json").read_text())
    base_layers = int(config["num_hidden_layers"])
    hidden = int(config["hidden_size"])
    intermediate = int(config["intermediate_size"])
    stamp = {
        "source_sha256": _source_digest(target_dir),
        "extra_layers": extra_layers,
        "seed": seed,
    }
    stamp_path = out_dir / STAMP
    if stamp_path.is_file() and json.loads(stamp_path.read_text()).get("build") == stamp:
        return HeavyTarget(
            out_dir, base_layers, extra_layers, json.loads(stamp_path.read_text())["parameters"]
        )

    weights = load_file(str(target_dir / "model.safetensors"))
    rng = np.random.default_rng(seed)
    for layer in range(base_layers, base_layers + extra_layers):
        weights.update(_extra_block(rng, f"model.layers.{layer}", hidden, intermediate))
    parameters = int(sum(w.size for w in weights.values()))

    out_dir.mkdir(parents=True, exist_ok=True)
    for name in _COPIED:
        if (target_dir / name).is_file():
            shutil.copyfile(target_dir / name, out_dir / name)
    config["num_hidden_layers"] = base_layers + extra_layers
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    save_file(weights, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    stamp_path.write_text(
        json.dumps(
            {
                "build": stamp,
                "parameters": parameters,
                "base_layers": base_layers,
                "note": "extra layers have zero o_proj and down_proj: same logits as the source",
            },
            indent=2,
        )
        + "\n"
    )
    return HeavyTarget(out_dir, base_layers, extra_layers, parameters)


def build_heavy_pair(
    pair_dir: Path, out_dir: Path, extra_layers: int = DEFAULT_EXTRA_LAYERS
) -> Path:
    """`out_dir`/target (heavy) and `out_dir`/draft (the shipped draft, copied): a pair
    directory laid out like the bundled one."""
    build_heavy_target(pair_dir / "target", out_dir / "target", extra_layers)
    draft = out_dir / "draft"
    if not (draft / "config.json").is_file():
        shutil.copytree(pair_dir / "draft", draft, dirs_exist_ok=True)
    return out_dir
