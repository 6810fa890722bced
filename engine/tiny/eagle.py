"""``train-tiny-eagle``: an EAGLE-1 head for the bundled target, in a few CPU minutes.

An EAGLE head drafts from the target's own features instead of from a separate
language model: at position j it reads ``fc(cat(embed(x_j), h_{j-1}))`` — the
embedding of the token just produced and the target's final hidden state one
position earlier — runs one Llama decoder layer (without its input norm) and
predicts x_{j+1} through the target's own LM head. Drafting further than one
token feeds the head's output back in as the next hidden state.

This is the layout vLLM 0.32's ``EagleLlamaForCausalLM`` loads for
``"method": "eagle"``: the directory holds a one-layer Llama ``config.json``
and weights named ``layers.0.*`` and ``fc.weight``; embeddings and LM head are
shared from the target at load time (the checkpoint has neither).

The head is trained on the target's features with the EAGLE paper's loss:
smooth-L1 regression of the next feature plus KL to the target's next-token
distribution, on corpus windows (and, with ``rollout_fraction`` > 0, on the
target's own greedy continuations, where a T=0 head is judged; slower on CPU).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

from engine.tiny import corpus as corpus_mod
from engine.tiny.adapter import load_model
from engine.tiny.data import TokenStream, WindowSampler, fixed_windows
from engine.tiny.distill import kl_to_target, target_rollouts
from engine.tiny.loop import LoopSettings, run_loop

EAGLE_DIR = "eagle"
REPORT_FILE = "eagle_report.json"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True)
class TrainEagleSettings:
    pair_dir: Path
    seed: int = 1234
    steps: int = 400
    lr: float = 2e-3
    batch_size: int = 8
    seq_len: int = 128
    prose_fraction: float = 0.5
    rollout_fraction: float = 0.0
    feature_weight: float = 1.0
    kl_weight: float = 0.1
    eval_prompts: int = 16
    eval_new_tokens: int = 48
    num_speculative_tokens: int = 3
    threads: int = 2


def head_config(target: LlamaConfig) -> LlamaConfig:
    """The target's config with one decoder layer: the head's own shapes."""
    config = LlamaConfig(**{**target.to_dict(), "num_hidden_layers": 1})
    config._attn_implementation = "sdpa"
    return config


class EagleHead(torch.nn.Module):
    """fc over [embedding, previous feature] -> one decoder layer (no input norm)."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        hidden = config.hidden_size
        self.fc = torch.nn.Linear(2 * hidden, hidden, bias=False)
        self.layer = LlamaDecoderLayer(config, layer_idx=0)
        # As vLLM's head: layer 0 has no input norm.
        self.layer.input_layernorm = torch.nn.Identity()  # type: ignore[assignment]
        self.rotary = LlamaRotaryEmbedding(config)

    def forward(
        self, embeds: torch.Tensor, features: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """embeds, features: [batch, seq, hidden]; positions: [batch, seq].

        Returns [batch, seq, hidden]."""
        assert embeds.shape == features.shape and positions.shape == embeds.shape[:2]
        x = self.fc(torch.cat((embeds, features), dim=-1))
        cos_sin = self.rotary(x, positions)
        out = self.layer(
            x, attention_mask=None, position_ids=positions, position_embeddings=cos_sin
        )
        hidden: torch.Tensor = out[0] if isinstance(out, tuple) else out
        return hidden

    def weights(self) -> dict[str, torch.Tensor]:
        """The checkpoint vLLM's EagleLlamaForCausalLM loads (fp16)."""
        named = {"fc.weight": self.fc.weight}
        named |= {f"layers.0.{k}": v for k, v in self.layer.state_dict().items()}
        return {k: v.detach().to(torch.float16).contiguous() for k, v in named.items()}


@torch.no_grad()
def target_features(
    target: LlamaForCausalLM, ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """[batch, seq] -> final (normed) hidden states [batch, seq, hidden] and logits
    [batch, seq, vocab]."""
    out = target(input_ids=ids, output_hidden_states=True)
    return out.hidden_states[-1].float(), out.logits.float()


def head_logits(target: LlamaForCausalLM, hidden: torch.Tensor) -> torch.Tensor:
    """The target's LM head over the head's (un-normed) output, as vLLM computes it."""
    logits: torch.Tensor = target.lm_head(hidden)
    return logits.float()


def eagle_loss(
    target: LlamaForCausalLM, head: EagleHead, ids: torch.Tensor, s: TrainEagleSettings
) -> torch.Tensor:
    """Loss on [batch, seq] token windows: input j reads (x_j, h_{j-1}) and must give h_j."""
    features, logits = target_features(target, ids)  # [b, n, h], [b, n, v]
    embeds = target.model.embed_tokens(ids[:, 1:]).detach()  # [b, n-1, h]
    positions = torch.arange(1, ids.shape[1]).expand(ids.shape[0], -1)
    predicted = head(embeds, features[:, :-1], positions)  # [b, n-1, h]
    feature_loss = F.smooth_l1_loss(predicted, features[:, 1:])
    kl = kl_to_target(logits[:, 1:], head_logits(target, predicted))
    return s.feature_weight * feature_loss + s.kl_weight * kl


@torch.no_grad()
def greedy_acceptance(
    target: LlamaForCausalLM, head: EagleHead, sequences: torch.Tensor, prompt_len: int, k: int
) -> dict[str, Any]:
    """Offline T=0 acceptance of the head drafting k tokens along the target's greedy path.

    At each window start t the head drafts k tokens autoregressively from the target's
    feature at t-1 and token x_t; a drafted token counts while it equals the target's.
    """
    features, _ = target_features(target, sequences)
    accepted: list[int] = []
    n = sequences.shape[1]
    for row in range(sequences.shape[0]):
        t = prompt_len
        while t + k < n:
            tokens, feats, pos = sequences[row, t : t + 1], features[row, t - 1 : t], t
            hits = 0
            history_e: list[torch.Tensor] = []
            history_f: list[torch.Tensor] = []
            for _ in range(k):
                history_e.append(target.model.embed_tokens(tokens))
                history_f.append(feats)
                e = torch.cat(history_e).unsqueeze(0)
                f = torch.cat(history_f).unsqueeze(0)
                p = torch.arange(t, pos + 1).unsqueeze(0)
                out = head(e, f, p)[0, -1:]
                guess = int(head_logits(target, out).argmax(-1))
                if guess != int(sequences[row, pos + 1]):
                    break
                hits += 1
                tokens, feats, pos = torch.tensor([guess]), out, pos + 1
            accepted.append(hits)
            t += hits + 1
    windows = len(accepted)
    assert windows > 0
    per_position = [sum(1 for a in accepted if a >= j) / windows for j in range(1, k + 1)]
    return {
        "windows": windows,
        "acceptance_rate": sum(accepted) / (windows * k),
        "mean_acceptance_length": 1 + sum(accepted) / windows,
        "per_position": per_position,
    }


def save_head(head: EagleHead, target_dir: Path, out_dir: Path) -> Path:
    """Write the head as vLLM loads it: one-layer Llama config, fp16 weights, tokenizer."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config = json.loads((target_dir / "config.json").read_text())
    config.update(num_hidden_layers=1, architectures=["LlamaForCausalLM"], torch_dtype="float16")
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file(head.weights(), str(out_dir / "model.safetensors"))
    for name in _TOKENIZER_FILES:
        if (target_dir / name).is_file():
            shutil.copy(target_dir / name, out_dir / name)
    return out_dir


def train_eagle(s: TrainEagleSettings, log: Callable[[str], None] = print) -> dict[str, Any]:
    torch.set_num_threads(s.threads)
    torch.manual_seed(s.seed)
    started = time.monotonic()
    target_dir = s.pair_dir / "target"
    tok = Tokenizer.from_file(str(target_dir / "tokenizer.json"))
    target = load_model(target_dir)
    for p in target.parameters():
        p.requires_grad_(False)
    corpus = corpus_mod.build_corpus()
    streams = {
        (split, kind): TokenStream.from_documents(tok, corpus.of_kind(split, kind))
        for split in ("train", "held_out")
        for kind in ("code", "prose")
    }
    sampler = WindowSampler(
        streams["train", "code"], streams["train", "prose"], s.seq_len, s.prose_fraction, s.seed
    )
    prompt_len = 16
    head = EagleHead(head_config(target.config))
    generator = torch.Generator().manual_seed(s.seed + 1)

    def batch(_step: int) -> torch.Tensor:
        windows = sampler.batch(s.batch_size)[:, : s.seq_len]
        if float(torch.rand(1, generator=generator)) < s.rollout_fraction:
            windows = target_rollouts(target, windows[:, :prompt_len], s.seq_len)
        return eagle_loss(target, head, windows, s)

    result = run_loop(
        "eagle head",
        head,
        batch,
        LoopSettings(steps=s.steps, lr=s.lr, warmup_steps=max(1, s.steps // 15), weight_decay=0.0),
        None,
        log,
    )
    held_out = fixed_windows(streams["held_out", "code"], prompt_len, s.eval_prompts // 2)
    held_out = torch.cat(
        [held_out, fixed_windows(streams["held_out", "prose"], prompt_len, s.eval_prompts // 2)]
    )[:, :prompt_len]
    sequences = target_rollouts(target, held_out, prompt_len + s.eval_new_tokens)
    acceptance = greedy_acceptance(target, head, sequences, prompt_len, s.num_speculative_tokens)
    out_dir = save_head(head, target_dir, s.pair_dir / EAGLE_DIR)
    report = {
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(s).items()},
        "steps_done": result.steps_done,
        "final_loss": result.final_loss,
        "offline_t0": acceptance,
        "seconds": round(time.monotonic() - started, 1),
    }
    (out_dir / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
    log(f"eagle head under {out_dir}: offline T=0 acceptance {acceptance['acceptance_rate']:.3f}")
    return report
