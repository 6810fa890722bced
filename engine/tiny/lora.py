"""Low-rank adapters (LoRA) on a Llama model's linear layers, saved in PEFT's format.

A wrapped layer computes ``W x + (alpha / r) * B A x`` with ``W`` frozen, ``A``
[r, in] small random and ``B`` [out, r] zero, so training starts from the base
model exactly (Hu et al. 2021). The saved directory is what vLLM's
``--lora-modules name=path`` loads: ``adapter_config.json`` and
``adapter_model.safetensors`` with PEFT's tensor names. No ``peft`` dependency.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

# Every linear layer of a Llama block; vLLM packs q/k/v and gate/up itself.
LLAMA_LINEAR_MODULES = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)
CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
# NOTE: PEFT names a wrapped model's tensors from the PeftModel root.
PEFT_PREFIX = "base_model.model."


@dataclass(frozen=True)
class LoraShape:
    rank: int = 8
    alpha: int = 16
    target_modules: tuple[str, ...] = LLAMA_LINEAR_MODULES

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank


class LoraLinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update."""

    def __init__(self, base: nn.Linear, shape: LoraShape, generator: torch.Generator) -> None:
        super().__init__()
        self.base = base
        self.scaling = shape.scaling
        for p in base.parameters():
            p.requires_grad_(False)
        a = torch.empty(shape.rank, base.in_features)
        # NOTE: PEFT's default init: A ~ kaiming-uniform(a=sqrt(5)), B = 0.
        bound = 1 / math.sqrt(base.in_features)
        a.uniform_(-bound, bound, generator=generator)
        self.lora_A = nn.Parameter(a)
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, shape.rank))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        update = (x @ self.lora_A.T) @ self.lora_B.T
        out: torch.Tensor = self.base(x) + self.scaling * update
        return out

    @torch.no_grad()
    def merged_weight(self) -> torch.Tensor:
        return self.base.weight + self.scaling * (self.lora_B @ self.lora_A)


def add_lora(model: nn.Module, shape: LoraShape, seed: int) -> dict[str, LoraLinear]:
    """Freeze ``model`` and wrap its target linear layers in place; returns them by name."""
    for p in model.parameters():
        p.requires_grad_(False)
    generator = torch.Generator().manual_seed(seed)
    targets = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] in shape.target_modules
    ]
    assert targets, f"no linear layer named any of {shape.target_modules}"
    wrapped: dict[str, LoraLinear] = {}
    for name, module in targets:
        parent_name, _, child = name.rpartition(".")
        lora = LoraLinear(module, shape, generator)
        setattr(model.get_submodule(parent_name), child, lora)
        wrapped[name] = lora
    return wrapped


def lora_parameters(wrapped: dict[str, LoraLinear]) -> list[nn.Parameter]:
    return [p for layer in wrapped.values() for p in (layer.lora_A, layer.lora_B)]


@torch.no_grad()
def merge_lora(model: nn.Module, wrapped: dict[str, LoraLinear]) -> None:
    """Fold each update into its base weight and unwrap: the plain adapted model."""
    for name, layer in wrapped.items():
        layer.base.weight.copy_(layer.merged_weight())
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name), child, layer.base)


def save_lora(
    wrapped: dict[str, LoraLinear], shape: LoraShape, out_dir: Path, base_model: str
) -> Path:
    """Write the adapter in PEFT's layout (fp16 tensors); returns the weights file."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors: dict[str, torch.Tensor] = {}
    for name, layer in wrapped.items():
        for part in ("lora_A", "lora_B"):
            weight = getattr(layer, part).detach().to(torch.float16).contiguous()
            tensors[f"{PEFT_PREFIX}{name}.{part}.weight"] = weight
    weights = out_dir / WEIGHTS_FILE
    save_file(tensors, str(weights), metadata={"format": "pt"})
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_model,
        "r": shape.rank,
        "lora_alpha": shape.alpha,
        "lora_dropout": 0.0,
        "target_modules": sorted(shape.target_modules),
        "bias": "none",
        "fan_in_fan_out": False,
        "modules_to_save": None,
        "use_rslora": False,
        "use_dora": False,
        "inference_mode": True,
    }
    (out_dir / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return weights


def load_lora(model: nn.Module, adapter: Path, seed: int = 0) -> dict[str, LoraLinear]:
    """Wrap ``model`` with the adapter saved in ``adapter`` (save_lora's layout)."""
    config = json.loads((adapter / CONFIG_FILE).read_text())
    shape = LoraShape(config["r"], config["lora_alpha"], tuple(config["target_modules"]))
    wrapped = add_lora(model, shape, seed)
    tensors = load_file(str(adapter / WEIGHTS_FILE))
    expected = {f"{PEFT_PREFIX}{n}.{part}.weight" for n in wrapped for part in ("lora_A", "lora_B")}
    if set(tensors) != expected:
        raise ValueError(f"{adapter}: tensors do not match the model's target layers")
    with torch.no_grad():
        for name, layer in wrapped.items():
            layer.lora_A.copy_(tensors[f"{PEFT_PREFIX}{name}.lora_A.weight"])
            layer.lora_B.copy_(tensors[f"{PEFT_PREFIX}{name}.lora_B.weight"])
    return wrapped
