"""Offline acceptance of a draft against its target, in torch, without vLLM.

Greedy (T = 0): along the target's own greedy continuation, the draft's token at
a position is accepted iff its argmax equals the target's. Speculative decoding
with k draft tokens then accepts the longest agreeing run (at most k) and emits
one more token from the target, so this simulation is exact up to numerics.

Sampling (T > 0): a draft token x ~ q is accepted with probability min(1, p/q),
so the chance that a position is accepted is beta = sum_x min(p(x), q(x)) =
1 - TV(p, q) (Leviathan et al. 2023). Per-position acceptance in a window is
estimated as the product of the betas along the text, which treats the
continuation after a rejection as if it were the reference text.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import LlamaForCausalLM

from engine.tiny.models import generate_greedy, logits_of


@dataclass(frozen=True)
class AcceptanceEstimate:
    temperature: float
    num_speculative_tokens: int
    positions: int  # token positions the estimate averages over
    per_token: float  # mean acceptance chance of a single draft token (alpha)
    per_position: list[float]  # P(draft token j of a window is accepted), j = 1..k
    mean_acceptance_length: float  # 1 + expected accepted tokens per window


def acceptance_probability(
    target_logits: torch.Tensor, draft_logits: torch.Tensor, temperature: float
) -> torch.Tensor:
    """[..., vocab] x2 -> [...]: sum_x min(p(x), q(x)) at the given temperature."""
    assert target_logits.shape == draft_logits.shape and temperature > 0
    p = torch.softmax(target_logits.float() / temperature, dim=-1)
    q = torch.softmax(draft_logits.float() / temperature, dim=-1)
    return torch.minimum(p, q).sum(dim=-1)


def greedy_agreement(target_logits: torch.Tensor, draft_logits: torch.Tensor) -> torch.Tensor:
    """[..., vocab] x2 -> [...] bool: argmaxes agree."""
    assert target_logits.shape == draft_logits.shape
    return target_logits.argmax(dim=-1) == draft_logits.argmax(dim=-1)


def greedy_windows(agree: torch.Tensor, k: int) -> list[int]:
    """Accepted counts of successive speculation windows over a [seq] agreement vector.

    Each window accepts the leading run of agreements (at most k) and the target
    then emits one token itself, so the next window starts n + 1 positions later.
    """
    assert agree.ndim == 1 and k >= 1
    flags = agree.tolist()
    accepted: list[int] = []
    t = 0
    # NOTE: only windows that fit entirely in the sequence count, so the tail
    # never truncates a run and biases the mean down.
    while t + k <= len(flags):
        n = 0
        while n < k and flags[t + n]:
            n += 1
        accepted.append(n)
        t += n + 1
    return accepted


def positional_products(beta: torch.Tensor, k: int) -> torch.Tensor:
    """[seq] per-token acceptance -> [k]: mean over windows of prod_{i<j} beta[t+i]."""
    assert beta.ndim == 1 and beta.numel() >= k
    starts = beta.numel() - k + 1
    windows = torch.stack([beta[j : j + starts] for j in range(k)], dim=1)  # [starts, k]
    return windows.cumprod(dim=1).mean(dim=0)


@torch.no_grad()
def greedy_continuations(
    target: LlamaForCausalLM, prompts: list[torch.Tensor], new_tokens: int
) -> list[torch.Tensor]:
    """The target's own greedy continuation of each [prompt_len] prompt: prompt + new."""
    return [generate_greedy(target, prompt.unsqueeze(0), new_tokens)[0] for prompt in prompts]


@torch.no_grad()
def estimate_greedy(
    target: LlamaForCausalLM,
    draft: LlamaForCausalLM,
    prompts: list[torch.Tensor],
    k: int,
    new_tokens: int = 64,
) -> AcceptanceEstimate:
    accepted: list[int] = []
    for seq in greedy_continuations(target, prompts, new_tokens):
        ids = seq.unsqueeze(0)  # [1, prompt + new]
        agree = greedy_agreement(logits_of(target, ids)[0], logits_of(draft, ids)[0])
        # Predictions for the generated tokens come from positions prompt-1 .. end-1.
        prompt_len = seq.numel() - new_tokens
        accepted.extend(greedy_windows(agree[prompt_len - 1 : -1], k))
    return _from_window_counts(accepted, k, len(accepted))


def _from_window_counts(accepted: list[int], k: int, windows: int) -> AcceptanceEstimate:
    assert windows > 0
    per_position = [sum(1 for n in accepted if n >= j) / windows for j in range(1, k + 1)]
    drafted = windows * k
    return AcceptanceEstimate(
        temperature=0.0,
        num_speculative_tokens=k,
        positions=sum(n + 1 for n in accepted),
        per_token=sum(accepted) / drafted,
        per_position=per_position,
        mean_acceptance_length=1 + sum(accepted) / windows,
    )


@torch.no_grad()
def estimate_sampled(
    target: LlamaForCausalLM,
    draft: LlamaForCausalLM,
    windows: torch.Tensor,
    k: int,
    temperature: float,
) -> AcceptanceEstimate:
    """Acceptance at temperature > 0 along reference text windows [batch, seq]."""
    assert windows.ndim == 2
    betas = []
    per_position = torch.zeros(k)
    for row in windows:
        ids = row.unsqueeze(0)
        beta = acceptance_probability(
            logits_of(target, ids)[0], logits_of(draft, ids)[0], temperature
        )
        betas.append(beta)
        per_position += positional_products(beta, k)
    per_position /= windows.shape[0]
    alpha = float(torch.cat(betas).mean())
    return AcceptanceEstimate(
        temperature=temperature,
        num_speculative_tokens=k,
        positions=int(sum(b.numel() for b in betas)),
        per_token=alpha,
        per_position=[float(x) for x in per_position],
        mean_acceptance_length=1 + float(per_position.sum()),
    )
