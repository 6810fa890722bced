"""Draft perplexity on the target's own continuations (torch; imported only here).

Shown next to acceptance because it is the number people reach for first, and
it is the wrong one: acceptance measures agreement with the *target's*
distribution at each position, perplexity only how surprised the draft is by
the text; a draft can score a low perplexity and still disagree with the target
where it matters.
"""

import math
from pathlib import Path


def draft_perplexity(draft_dir: str | Path, texts: list[tuple[str, str]]) -> float | None:
    """exp(mean NLL) of the draft over each continuation's tokens given its prompt text."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not texts:
        return None
    tokenizer = AutoTokenizer.from_pretrained(str(draft_dir))
    model = AutoModelForCausalLM.from_pretrained(str(draft_dir), dtype=torch.float32)
    total_nll, total_tokens = 0.0, 0
    with torch.no_grad():
        for prompt, completion in texts:
            prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
            completion_ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
            if not completion_ids:
                continue
            ids = torch.tensor([prompt_ids + completion_ids])  # [1, seq]
            logits = model(ids).logits[0, :-1].float()  # [seq - 1, vocab]
            targets = ids[0, 1:]  # [seq - 1]
            nll = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
            tail = nll[len(prompt_ids) - 1 :] if prompt_ids else nll
            total_nll += float(tail.sum())
            total_tokens += int(tail.numel())
    return math.exp(total_nll / total_tokens) if total_tokens else None
