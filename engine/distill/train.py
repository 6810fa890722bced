"""Distil a draft from a target: the draft learns the target's full next-token
distribution (forward KL) along the target's own greedy continuations of the
training prompts, rendered through the target's chat template, so it is trained
where speculation will judge it (the template's system and tool syntax included).

The draft keeps the target's tokenizer, vocabulary and attention shape (head
dimension, heads) and has fewer layers; it starts from the target's embeddings,
first layers, final norm and head. Checkpoints (draft, optimizer, step) are
written every `checkpoint_every` steps and a rerun resumes from the latest.
"""

import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "generation_config.json",
)


@dataclass(frozen=True)
class DistillConfig:
    layers: int | None = None  # default: a quarter of the target's, at least 1
    steps: int = 200
    batch_size: int = 4
    learning_rate: float = 1e-3
    new_tokens: int = 48
    max_prompt_tokens: int = 128
    checkpoint_every: int = 50
    seed: int = 0


def render(tokenizer: Any, prompt: Any) -> str:
    """Through the target's chat template when the prompt is a chat and a template exists."""
    if isinstance(prompt, list) and getattr(tokenizer, "chat_template", None):
        return str(
            tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        )
    if isinstance(prompt, list):
        return "\n".join(str(m.get("content", "")) for m in prompt)
    return str(prompt)


def draft_from_target(target_dir: Path, target: Any, layers: int) -> Any:
    """A shallower copy of the target: same width, heads and vocabulary, `layers` layers."""
    config = AutoConfig.from_pretrained(str(target_dir))
    config.num_hidden_layers = layers
    draft = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)  # type: ignore[no-untyped-call]
    # NOTE: strict=False: the draft's keys are a subset (layers beyond `layers` drop).
    state = {
        k: v
        for k, v in target.state_dict().items()
        if not k.startswith("model.layers.") or int(k.split(".")[2]) < layers
    }
    draft.load_state_dict(state, strict=False)
    return draft


@torch.no_grad()
def continuations(
    target: Any, tokenizer: Any, prompts: list[Any], cfg: DistillConfig
) -> list[torch.Tensor]:
    """The target's greedy continuation of each rendered prompt: [prompt + new] ids."""
    out = []
    for prompt in prompts:
        ids = tokenizer(render(tokenizer, prompt), add_special_tokens=False, return_tensors="pt")
        input_ids = ids["input_ids"][:, -cfg.max_prompt_tokens :]  # [1, prompt]
        generated = target.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=cfg.new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id or 0,
        )
        out.append(generated[0])
    return out


def kl_loss(target: Any, draft: Any, batch: list[torch.Tensor]) -> torch.Tensor:
    """Mean forward KL(p_target || q_draft) over every position of the batch."""
    losses = []
    for seq in batch:
        ids = seq.unsqueeze(0)  # [1, seq]
        with torch.no_grad():
            log_p = F.log_softmax(target(ids).logits.float(), dim=-1)  # [1, seq, vocab]
        log_q = F.log_softmax(draft(ids).logits.float(), dim=-1)  # [1, seq, vocab]
        losses.append((log_p.exp() * (log_p - log_q)).sum(dim=-1).mean())
    return torch.stack(losses).mean()


def latest_checkpoint(out: Path) -> Path | None:
    checkpoints = sorted(
        (p for p in (out / "checkpoints").glob("step-*") if (p / "state.pt").is_file()),
        key=lambda p: int(p.name.removeprefix("step-")),
    )
    return checkpoints[-1] if checkpoints else None


def save_checkpoint(out: Path, draft: Any, optimizer: Any, step: int, losses: list[float]) -> None:
    path = out / "checkpoints" / f"step-{step}"
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    draft.save_pretrained(tmp)
    torch.save(
        {"optimizer": optimizer.state_dict(), "step": step, "losses": losses}, tmp / "state.pt"
    )
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)  # a checkpoint is complete or absent, never half-written


def distill(
    target_dir: Path,
    prompts: list[Any],
    out: Path,
    cfg: DistillConfig,
    *,
    progress: Callable[[int, int, float], None] = lambda _s, _n, _l: None,
) -> dict[str, Any]:
    """Train (or resume) and write the draft to `out`; returns the training summary."""
    torch.manual_seed(cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(target_dir))
    target = AutoModelForCausalLM.from_pretrained(str(target_dir), dtype=torch.float32)
    target.requires_grad_(False)
    layers = cfg.layers or max(1, target.config.num_hidden_layers // 4)
    out.mkdir(parents=True, exist_ok=True)
    resume = latest_checkpoint(out)
    if resume is not None:
        draft = AutoModelForCausalLM.from_pretrained(str(resume), dtype=torch.float32)
    else:
        draft = draft_from_target(target_dir, target, layers)
    optimizer = torch.optim.AdamW(draft.parameters(), lr=cfg.learning_rate)
    step, losses = 0, []
    if resume is not None:
        state = torch.load(resume / "state.pt", weights_only=False)
        optimizer.load_state_dict(state["optimizer"])
        step, losses = int(state["step"]), list(state["losses"])
    sequences = continuations(target, tokenizer, prompts, cfg)
    generator = torch.Generator().manual_seed(cfg.seed + step)
    draft.train()
    while step < cfg.steps:
        order = torch.randperm(len(sequences), generator=generator)[: cfg.batch_size]
        loss = kl_loss(target, draft, [sequences[i] for i in order.tolist()])
        optimizer.zero_grad()
        torch.autograd.backward(loss)
        optimizer.step()
        step += 1
        losses.append(float(loss.detach()))
        progress(step, cfg.steps, losses[-1])
        if step % cfg.checkpoint_every == 0 or step == cfg.steps:
            save_checkpoint(out, draft, optimizer, step, losses)
    draft.save_pretrained(out)
    for name in TOKENIZER_FILES:
        if (target_dir / name).is_file():
            shutil.copy2(target_dir / name, out / name)
    return {
        "target": str(target_dir),
        "layers": draft.config.num_hidden_layers,
        "target_layers": target.config.num_hidden_layers,
        "steps": step,
        "resumed_from": int(resume.name.removeprefix("step-")) if resume else None,
        "prompts": len(prompts),
        "first_loss": losses[0] if losses else math.nan,
        "final_loss": losses[-1] if losses else math.nan,
        "config": json.loads(json.dumps(cfg.__dict__)),
    }
