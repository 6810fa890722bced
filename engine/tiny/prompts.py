"""Held-out prompts for acceptance measurements (offline and through vLLM).

Prompts are cut from held-out documents at line boundaries, so a prompt ends
where a real continuation would start, and the same list is used by the torch
evaluator and by the vLLM measurement.
"""

from __future__ import annotations

from engine.tiny.corpus import Corpus, Kind

PROMPT_CHARS = 400


def held_out_prompts(
    corpus: Corpus, kind: Kind, count: int, chars: int = PROMPT_CHARS
) -> list[str]:
    """Up to ``count`` prompts of about ``chars`` characters, spread over documents."""
    docs = sorted(corpus.of_kind("held_out", kind), key=lambda d: d.name)
    candidates: list[list[str]] = []
    for doc in docs:
        lines = doc.text.splitlines(keepends=True)
        found: list[str] = []
        start = 0
        while start < len(lines):
            chunk, end = "", start
            while end < len(lines) and len(chunk) < chars:
                chunk += lines[end]
                end += 1
            if len(chunk) >= chars // 2 and chunk.strip():
                found.append(chunk)
            # NOTE: jump well past this chunk so prompts from one file do not overlap.
            start = end + 3 * (end - start)
        candidates.append(found)
    # Round-robin over documents so no single file dominates the prompt set.
    out: list[str] = []
    depth = 0
    while len(out) < count and any(depth < len(c) for c in candidates):
        for found in candidates:
            if depth < len(found) and len(out) < count:
                out.append(found[depth])
        depth += 1
    return out
