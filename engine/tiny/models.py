"""Building, measuring and saving the Llama models of the pair (HF format vLLM loads)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

from engine.tiny.shapes import ModelShape, llama_config_kwargs


def build_model(
    shape: ModelShape, vocab_size: int, max_positions: int, eos_id: int, seed: int
) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(**llama_config_kwargs(shape, vocab_size, max_positions, eos_id))
    model = LlamaForCausalLM(config)
    model.eval()
    return model


def parameter_count(model: torch.nn.Module) -> int:
    # NOTE: parameters() yields a tied embedding once, matching what is stored.
    return sum(p.numel() for p in model.parameters())


def logits_of(model: LlamaForCausalLM, input_ids: torch.Tensor) -> torch.Tensor:
    """[batch, seq] int64 -> [batch, seq, vocab] float32 logits."""
    assert input_ids.ndim == 2
    logits: torch.Tensor = model(input_ids=input_ids).logits
    return logits.float()


def lm_loss(model: LlamaForCausalLM, windows: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy on [batch, seq + 1] windows."""
    inputs, labels = windows[:, :-1], windows[:, 1:]
    logits = logits_of(model, inputs)  # [batch, seq, vocab]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


@torch.no_grad()
def held_out_loss(model: LlamaForCausalLM, windows: torch.Tensor, batch_size: int = 8) -> float:
    total, count = 0.0, 0
    for i in range(0, windows.shape[0], batch_size):
        chunk = windows[i : i + batch_size]
        total += float(lm_loss(model, chunk)) * chunk.shape[0]
        count += chunk.shape[0]
    return total / count


def save_model(model: LlamaForCausalLM, out_dir: Path, eos_id: int) -> None:
    """fp16 safetensors + config.json + generation_config.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(
        bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=eos_id
    )
    half = model.to(torch.float16)
    half.save_pretrained(out_dir, safe_serialization=True)
    model.to(torch.float32)
    # NOTE: pin the fields vLLM reads, whatever this transformers version chose to write.
    config_path = out_dir / "config.json"
    config = json.loads(config_path.read_text())
    config["architectures"] = ["LlamaForCausalLM"]
    config["torch_dtype"] = "float16"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
