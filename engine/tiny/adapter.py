"""``train-tiny-adapter``: a LoRA adapter for the bundled target that shifts its distribution.

The adapter plays a tenant whose traffic the draft never saw: it is trained on the
same standard-library corpus enciphered with ROT13 (a stand-in for another
language: the same tokenizer, different token statistics). The draft, distilled
from the unadapted target, keeps predicting plain code and English, so its
acceptance against the adapted target collapses. Only the adapter is trained
(the base weights are frozen), in a few CPU minutes, and evaluated with the
pair's own offline evaluator (``engine.tiny.evaluate``) on held-out documents.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, LlamaForCausalLM

from engine.tiny import corpus as corpus_mod
from engine.tiny.corpus import Document, Kind
from engine.tiny.data import TokenStream, WindowSampler, fixed_windows
from engine.tiny.evaluate import estimate_greedy, estimate_sampled
from engine.tiny.loop import LoopSettings, run_loop
from engine.tiny.lora import LoraShape, add_lora, lora_parameters, merge_lora, save_lora
from engine.tiny.models import held_out_loss, lm_loss
from engine.tiny.styles import REPORT_FILE, STYLES, adapter_dir, styled_prompts

KINDS: tuple[Kind, ...] = ("code", "prose")


@dataclass(frozen=True)
class TrainAdapterSettings:
    pair_dir: Path
    name: str = "rot13"
    style: str = "rot13"
    seed: int = 1234
    rank: int = 8
    alpha: int = 16
    steps: int = 200
    lr: float = 3e-3
    batch_size: int = 8
    seq_len: int = 128
    prose_fraction: float = 0.5
    eval_prompts: int = 16
    eval_new_tokens: int = 48
    num_speculative_tokens: int = 3
    threads: int = 2


def load_model(model_dir: Path) -> LlamaForCausalLM:
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    assert isinstance(model, LlamaForCausalLM), f"{model_dir} is not a Llama model"
    torch.nn.Module.eval(model)
    return model


def _styled(docs: list[Document], style: str) -> list[Document]:
    return [Document(d.name, d.kind, STYLES[style](d.text)) for d in docs]


class _Trainable(torch.nn.Module):
    """Holds only the adapter's parameters, for run_loop's optimiser and clipping."""

    def __init__(self, params: list[torch.nn.Parameter]) -> None:
        super().__init__()
        self.params = torch.nn.ParameterList(params)


def _acceptance(
    target: LlamaForCausalLM,
    draft: LlamaForCausalLM,
    prompts: dict[Kind, list[torch.Tensor]],
    windows: dict[Kind, torch.Tensor],
    s: TrainAdapterSettings,
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    k = s.num_speculative_tokens
    for kind in KINDS:
        greedy = estimate_greedy(target, draft, prompts[kind], k, s.eval_new_tokens)
        out[f"{kind}_t0"] = asdict(greedy)
        sampled = estimate_sampled(target, draft, windows[kind][:8, :-1], k, 1.0)
        out[f"{kind}_t1.0"] = asdict(sampled)
    return out


def train_adapter(s: TrainAdapterSettings, log: Callable[[str], None] = print) -> dict[str, Any]:
    torch.set_num_threads(s.threads)
    torch.manual_seed(s.seed)
    started = time.monotonic()
    out_dir = adapter_dir(s.pair_dir, s.name)
    tok = Tokenizer.from_file(str(s.pair_dir / "target" / "tokenizer.json"))
    target = load_model(s.pair_dir / "target")
    draft = load_model(s.pair_dir / "draft")

    corpus = corpus_mod.build_corpus()
    streams = {
        (split, kind): TokenStream.from_documents(
            tok, _styled(corpus.of_kind(split, kind), s.style)
        )
        for split in ("train", "held_out")
        for kind in KINDS
    }
    log("tokens: " + ", ".join(f"{a}/{b} {len(v)}" for (a, b), v in streams.items()))
    sampler = WindowSampler(
        streams["train", "code"], streams["train", "prose"], s.seq_len, s.prose_fraction, s.seed
    )
    windows = {k: fixed_windows(streams["held_out", k], s.seq_len, 24) for k in KINDS}
    prompts = {
        kind: [
            torch.tensor(tok.encode(t).ids, dtype=torch.int64)
            for t in styled_prompts(corpus, kind, s.eval_prompts, s.style)
        ]
        for kind in KINDS
    }
    # The unadapted target on the same styled traffic: what the adapter changes.
    base_loss = {kind: held_out_loss(target, w) for kind, w in windows.items()}
    base_acceptance = _acceptance(target, draft, prompts, windows, s)

    shape = LoraShape(rank=s.rank, alpha=s.alpha)
    wrapped = add_lora(target, shape, s.seed)
    trainable = _Trainable(lora_parameters(wrapped))
    result = run_loop(
        f"adapter {s.name}",
        trainable,
        lambda _step: lm_loss(target, sampler.batch(s.batch_size)),
        LoopSettings(steps=s.steps, lr=s.lr, warmup_steps=max(1, s.steps // 15), weight_decay=0.0),
        None,
        log,
    )
    torch.nn.Module.eval(target)
    # NOTE: relative, so the committed adapter names no machine's paths.
    weights = save_lora(wrapped, shape, out_dir, base_model="../../target")
    merge_lora(target, wrapped)
    adapted_loss = {kind: held_out_loss(target, w) for kind, w in windows.items()}
    adapted_acceptance = _acceptance(target, draft, prompts, windows, s)
    for name, est in adapted_acceptance.items():
        log(
            f"offline acceptance {name}: unadapted target"
            f" {base_acceptance[name]['mean_acceptance_length']:.3f},"
            f" adapted {est['mean_acceptance_length']:.3f}"
        )
    report: dict[str, Any] = {
        "settings": {k: v for k, v in asdict(s).items() if k != "pair_dir"},
        "torch": torch.__version__,
        "adapter_parameters": sum(p.numel() for p in lora_parameters(wrapped)),
        "adapter_bytes": weights.stat().st_size,
        "target_modules": list(shape.target_modules),
        "steps": result.steps_done,
        "train_seconds": result.seconds,
        "final_train_loss": result.final_loss,
        "loss_curve": result.losses,
        "held_out_loss": {"unadapted": base_loss, "adapted": adapted_loss},
        "offline_acceptance": {"unadapted": base_acceptance, "adapted": adapted_acceptance},
        "total_seconds": time.monotonic() - started,
    }
    (out_dir / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
    log(f"adapter {s.name} in {out_dir} ({report['total_seconds']:.0f}s)")
    return report
