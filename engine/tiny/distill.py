"""Draft distillation: match the target's full next-token distribution.

Forward KL(p_target || q_draft) on the target's soft distribution carries far
more signal per token than the one-hot label, which is what lets a 2-layer,
128-wide draft agree with the target often enough for speculation to pay.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import LlamaForCausalLM

from engine.tiny.models import generate_greedy, logits_of


def kl_to_target(
    target_logits: torch.Tensor, draft_logits: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """Mean over positions of KL(softmax(t/T) || softmax(d/T)); both [..., vocab]."""
    assert target_logits.shape == draft_logits.shape
    log_p = F.log_softmax(target_logits.float() / temperature, dim=-1)
    log_q = F.log_softmax(draft_logits.float() / temperature, dim=-1)
    kl = (log_p.exp() * (log_p - log_q)).sum(dim=-1)  # [...]
    return kl.mean()


def distill_loss(
    target: LlamaForCausalLM, draft: LlamaForCausalLM, windows: torch.Tensor
) -> torch.Tensor:
    """KL loss of the draft on [batch, seq + 1] windows (the last token is unused)."""
    inputs = windows[:, :-1]
    with torch.no_grad():
        teacher = logits_of(target, inputs)  # [batch, seq, vocab]
    student = logits_of(draft, inputs)  # [batch, seq, vocab]
    return kl_to_target(teacher, student)


@torch.no_grad()
def target_rollouts(target: LlamaForCausalLM, prompts: torch.Tensor, length: int) -> torch.Tensor:
    """Greedy continuations of [batch, prompt_len] prompts, returned as [batch, length].

    NOTE: at temperature 0 the draft is judged only along the target's own greedy
    path, which drifts away from human-written text; distilling on that path as
    well (sequence-level distillation) trains the draft where it is evaluated.
    """
    assert prompts.ndim == 2 and prompts.shape[1] < length
    return generate_greedy(target, prompts, length - prompts.shape[1])
