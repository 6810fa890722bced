"""Leakage guard: training prompts must not overlap the eval sets that will judge the draft.

Prompts are compared as sets of hashed word n-grams (blake2b, 8 bytes), so an
eval case copied into the training prompts, or sharing a long passage with one,
is found without keeping either text around.
"""

import hashlib
import json
from collections.abc import Iterable
from typing import Any

NGRAM = 8


def text_of(prompt: Any) -> str:
    """A chat prompt's message contents, or a completion prompt's text."""
    if isinstance(prompt, list):
        return "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))
    return str(prompt)


def ngram_hashes(text: str, n: int = NGRAM) -> set[bytes]:
    words = text.lower().split()
    if not words:
        return set()
    grams = [words] if len(words) < n else [words[i : i + n] for i in range(len(words) - n + 1)]
    return {hashlib.blake2b(json.dumps(g).encode(), digest_size=8).digest() for g in grams}


def overlapping(training: Iterable[Any], evaluation: Iterable[Any], n: int = NGRAM) -> int:
    """Training prompts sharing at least one hashed n-gram with any eval prompt."""
    held_out: set[bytes] = set()
    for prompt in evaluation:
        held_out |= ngram_hashes(text_of(prompt), n)
    return sum(1 for prompt in training if ngram_hashes(text_of(prompt), n) & held_out)
