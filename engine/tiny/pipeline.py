"""The whole ``train-tiny`` run: corpus -> tokenizer -> target -> distilled draft -> report.

Everything is seeded and counted in steps, so two runs on the same Python
version produce the same weights (up to the usual CPU float nondeterminism in
threaded reductions).
"""

from __future__ import annotations

import json
import platform
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from engine.tiny import corpus as corpus_mod
from engine.tiny.data import TokenStream, WindowSampler, fixed_windows
from engine.tiny.distill import distill_loss, kl_to_target, target_rollouts
from engine.tiny.evaluate import AcceptanceEstimate, estimate_greedy, estimate_sampled
from engine.tiny.loop import LoopResult, LoopSettings, run_loop
from engine.tiny.models import (
    build_model,
    held_out_loss,
    lm_loss,
    logits_of,
    parameter_count,
    save_model,
)
from engine.tiny.prompts import held_out_prompts
from engine.tiny.shapes import DRAFT_SHAPE, MAX_POSITIONS, TARGET_SHAPE, VOCAB_SIZE
from engine.tiny.tokenizer import EOS, copy_tokenizer, save_tokenizer, train_tokenizer

REPORT_FILE = "training_report.json"


@dataclass(frozen=True)
class TrainTinySettings:
    out: Path
    seed: int = 1234
    vocab_size: int = VOCAB_SIZE
    seq_len: int = 256
    batch_size: int = 8
    prose_fraction: float = 0.2
    target_steps: int = 1500
    target_lr: float = 4e-3
    draft_steps: int = 800
    draft_lr: float = 4e-3
    rollouts: int = 512  # greedy target continuations of code prompts, for the draft
    rollout_prompt_len: int = 64
    rollout_fraction: float = 0.625  # share of each draft batch taken from the rollouts
    # The draft is distilled on code only, like a draft tuned to one tenant's traffic:
    # it then tracks the target on code and visibly less on prose (the demo's segments).
    draft_prose_fraction: float = 0.0
    minutes: float = 38.0  # safety net; see run_loop
    eval_prompts: int = 16
    eval_new_tokens: int = 48
    num_speculative_tokens: int = 3
    threads: int = 2


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def _estimate_dict(e: AcceptanceEstimate) -> dict[str, Any]:
    return asdict(e)


def train_tiny(s: TrainTinySettings, log: Callable[[str], None] = print) -> dict[str, Any]:
    torch.set_num_threads(s.threads)
    _seed_everything(s.seed)
    started = time.monotonic()
    deadline = started + s.minutes * 60
    target_dir, draft_dir = s.out / "target", s.out / "draft"

    corpus = corpus_mod.build_corpus()
    log(f"corpus: {json.dumps(corpus.summary())}")

    tok: Tokenizer = train_tokenizer((d.text for d in corpus.train), s.vocab_size)
    eos_id = tok.token_to_id(EOS)
    assert eos_id is not None, "the trainer always adds the special tokens"
    save_tokenizer(tok, target_dir, MAX_POSITIONS)
    copy_tokenizer(target_dir, draft_dir)
    log(f"tokenizer: vocab {tok.get_vocab_size()} ({time.monotonic() - started:.0f}s)")

    streams = {
        (split, kind): TokenStream.from_documents(tok, corpus.of_kind(split, kind))
        for split in ("train", "held_out")
        for kind in ("code", "prose")
    }
    log("tokens: " + ", ".join(f"{a}/{b} {len(v)}" for (a, b), v in streams.items()))
    sampler = WindowSampler(
        streams["train", "code"], streams["train", "prose"], s.seq_len, s.prose_fraction, s.seed
    )
    eval_windows = {
        kind: fixed_windows(streams["held_out", kind], s.seq_len, 24) for kind in ("code", "prose")
    }

    # --- target: next-token cross-entropy -------------------------------------
    target = build_model(TARGET_SHAPE, s.vocab_size, MAX_POSITIONS, eos_id, s.seed)
    log(f"target: {parameter_count(target):,} parameters, {TARGET_SHAPE.as_dict()}")
    # Leave a share of the budget for the draft and the evaluation.
    target_deadline = started + s.minutes * 60 * 0.6
    target_result = run_loop(
        "target",
        target,
        lambda _step: lm_loss(target, sampler.batch(s.batch_size)),
        LoopSettings(
            steps=s.target_steps, lr=s.target_lr, warmup_steps=max(1, s.target_steps // 15)
        ),
        target_deadline,
        log,
    )
    target_eval = {k: held_out_loss(target, w) for k, w in eval_windows.items()}
    log(f"target held-out loss: {target_eval}")
    save_model(target, target_dir, eos_id)

    # --- draft: KL to the target's soft distribution --------------------------
    for p in target.parameters():
        p.requires_grad_(False)
    rollout_started = time.monotonic()
    code_only = WindowSampler(
        streams["train", "code"],
        streams["train", "prose"],
        s.rollout_prompt_len - 1,
        0.0,
        s.seed + 2,
    )
    rollouts = target_rollouts(target, code_only.batch(s.rollouts), s.seq_len + 1)
    rollout_generator = torch.Generator().manual_seed(s.seed + 3)
    n_rollout_rows = round(s.batch_size * s.rollout_fraction)
    log(f"rollouts: {tuple(rollouts.shape)} in {time.monotonic() - rollout_started:.0f}s")

    draft_sampler = WindowSampler(
        streams["train", "code"],
        streams["train", "prose"],
        s.seq_len,
        s.draft_prose_fraction,
        s.seed + 4,
    )

    def draft_batch() -> torch.Tensor:
        rows = torch.randint(0, rollouts.shape[0], (n_rollout_rows,), generator=rollout_generator)
        corpus_rows = draft_sampler.batch(s.batch_size - n_rollout_rows)
        return torch.cat([corpus_rows, rollouts[rows]])  # [batch, seq_len + 1]

    draft = build_model(DRAFT_SHAPE, s.vocab_size, MAX_POSITIONS, eos_id, s.seed + 1)
    log(f"draft: {parameter_count(draft):,} parameters, {DRAFT_SHAPE.as_dict()}")
    draft_result = run_loop(
        "draft",
        draft,
        lambda _step: distill_loss(target, draft, draft_batch()),
        LoopSettings(steps=s.draft_steps, lr=s.draft_lr, warmup_steps=max(1, s.draft_steps // 15)),
        deadline - 60,
        log,
    )
    draft_eval = {k: held_out_loss(draft, w) for k, w in eval_windows.items()}
    with torch.no_grad():
        draft_kl = {
            k: float(kl_to_target(logits_of(target, w[:8, :-1]), logits_of(draft, w[:8, :-1])))
            for k, w in eval_windows.items()
        }
    log(f"draft held-out loss: {draft_eval}, KL to target: {draft_kl}")
    save_model(draft, draft_dir, eos_id)

    # --- offline acceptance ---------------------------------------------------
    acceptance: dict[str, dict[str, Any]] = {}
    k = s.num_speculative_tokens
    for kind in ("code", "prose"):
        texts = held_out_prompts(corpus, kind, s.eval_prompts)
        prompts = [torch.tensor(tok.encode(t).ids, dtype=torch.int64) for t in texts]
        greedy = estimate_greedy(target, draft, prompts, k, s.eval_new_tokens)
        acceptance[f"{kind}_t0"] = _estimate_dict(greedy)
        for temp in (1.0, 1.3):
            sampled = estimate_sampled(target, draft, eval_windows[kind][:8, :-1], k, temp)
            acceptance[f"{kind}_t{temp}"] = _estimate_dict(sampled)
    for name, est in acceptance.items():
        log(f"offline acceptance {name}: mean length {est['mean_acceptance_length']:.3f}")

    report: dict[str, Any] = {
        "settings": {k2: str(v) if isinstance(v, Path) else v for k2, v in asdict(s).items()},
        "python": platform.python_version(),
        "torch": torch.__version__,
        "corpus": corpus.summary(),
        "tokens": {f"{a}_{b}": len(v) for (a, b), v in streams.items()},
        "vocab_size": tok.get_vocab_size(),
        "target": _model_facts(target, TARGET_SHAPE.as_dict(), target_result, target_eval),
        "draft": {
            **_model_facts(draft, DRAFT_SHAPE.as_dict(), draft_result, draft_eval),
            "held_out_kl_to_target": draft_kl,
        },
        "offline_acceptance": acceptance,
        "total_seconds": time.monotonic() - started,
    }
    (s.out / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
    log(f"done in {report['total_seconds']:.0f}s; report in {s.out / REPORT_FILE}")
    return report


def _model_facts(
    model: torch.nn.Module, shape: dict[str, int], result: LoopResult, held_out: dict[str, float]
) -> dict[str, Any]:
    return {
        "shape": shape,
        "parameters": parameter_count(model),
        "steps": result.steps_done,
        "train_seconds": result.seconds,
        "stopped_by_time": result.stopped_by_time,
        "final_train_loss": result.final_loss,
        "loss_curve": result.losses,
        "held_out_loss": held_out,
    }
