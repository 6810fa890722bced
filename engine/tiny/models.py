"""Building, measuring and saving the Llama models of the pair (HF format vLLM loads)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from engine.tiny.shapes import ModelShape, llama_config_kwargs


def build_model(
    shape: ModelShape, vocab_size: int, max_positions: int, eos_id: int, seed: int
) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(**llama_config_kwargs(shape, vocab_size, max_positions, eos_id))
    # NOTE: transformers leaves the constructor unannotated; name the type it returns.
    new_llama: Callable[[LlamaConfig], LlamaForCausalLM] = LlamaForCausalLM
    model = new_llama(config)
    torch.nn.Module.eval(model)
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
    torch.nn.Module.to(model, torch.float16)
    model.save_pretrained(out_dir, safe_serialization=True)
    torch.nn.Module.to(model, torch.float32)
    generation = {"bos_token_id": eos_id, "eos_token_id": eos_id, "pad_token_id": eos_id}
    (out_dir / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    # NOTE: pin the fields vLLM reads, whatever this transformers version chose to write.
    config_path = out_dir / "config.json"
    config = json.loads(config_path.read_text())
    config["architectures"] = ["LlamaForCausalLM"]
    config["torch_dtype"] = "float16"
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


@torch.no_grad()
def generate_greedy(
    model: LlamaForCausalLM, prompts: torch.Tensor, new_tokens: int
) -> torch.Tensor:
    """[batch, prompt_len] -> [batch, prompt_len + new_tokens]; exactly new_tokens, no early EOS."""
    assert prompts.ndim == 2
    generate = cast(Any, model).generate
    out: torch.Tensor = generate(
        input_ids=prompts,
        attention_mask=torch.ones_like(prompts),
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        do_sample=False,
    )
    assert out.shape == (prompts.shape[0], prompts.shape[1] + new_tokens)
    return out
