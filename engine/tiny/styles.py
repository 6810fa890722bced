"""Where the tiny target's LoRA adapters live and the text styles they are trained on.

Light on purpose (no torch): the vLLM measurement, the pools and the tests need the
adapter's directory and its tenant's prompts, not the training code.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from pathlib import Path

from engine.tiny.corpus import Corpus, Kind
from engine.tiny.prompts import held_out_prompts

ADAPTERS_DIR = "adapters"
REPORT_FILE = "training_report.json"


def rot13(text: str) -> str:
    return codecs.encode(text, "rot13")


# A style turns plain corpus text into an adapter's tenant's text (and its prompts).
STYLES: dict[str, Callable[[str], str]] = {"rot13": rot13}


def adapter_dir(pair_dir: Path, name: str) -> Path:
    return pair_dir / ADAPTERS_DIR / name


def styled_prompts(corpus: Corpus, kind: Kind, count: int, style: str) -> list[str]:
    """The pair's held-out prompts, in the adapter's style (what its tenant sends)."""
    return [STYLES[style](text) for text in held_out_prompts(corpus, kind, count)]
