"""Training text that every Python install already has: no download, same bytes everywhere.

Code comes from the standard library's own ``.py`` sources and prose from the
English help topics in ``pydoc_data.topics``. Each document is assigned to the
train or held-out split by a hash of its name, so the split does not depend on
directory listing order or on which files a particular install happens to ship.
"""

from __future__ import annotations

import hashlib
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Kind = Literal["code", "prose"]

# NOTE: tests and vendored packages are excluded: tests are repetitive fixtures,
# site-packages is whatever the user installed (not reproducible).
_EXCLUDED_PARTS = frozenset(
    {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__", "lib2to3"}
)
HELD_OUT_BUCKETS = 20  # 1 bucket in 20 goes to held-out: ~5 % of documents
MAX_CODE_FILE_BYTES = 200_000  # a few generated tables would dominate otherwise


@dataclass(frozen=True)
class Document:
    name: str  # stable identifier: path relative to the stdlib, or "pydoc:<topic>"
    kind: Kind
    text: str


@dataclass
class Corpus:
    train: list[Document] = field(default_factory=list)
    held_out: list[Document] = field(default_factory=list)

    def of_kind(self, split: Literal["train", "held_out"], kind: Kind) -> list[Document]:
        docs = self.train if split == "train" else self.held_out
        return [d for d in docs if d.kind == kind]

    def summary(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for split, docs in (("train", self.train), ("held_out", self.held_out)):
            for kind in ("code", "prose"):
                chosen = [d for d in docs if d.kind == kind]
                out[f"{split}_{kind}"] = {
                    "documents": len(chosen),
                    "characters": sum(len(d.text) for d in chosen),
                }
        return out


def is_held_out(name: str) -> bool:
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:4], "big") % HELD_OUT_BUCKETS == 0


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def iter_code_documents(root: Path | None = None) -> Iterator[Document]:
    base = root or stdlib_root()
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base)
        if _EXCLUDED_PARTS.intersection(rel.parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if not text.strip() or len(text) > MAX_CODE_FILE_BYTES:
            continue
        yield Document(name=rel.as_posix(), kind="code", text=text)


def iter_prose_documents() -> Iterator[Document]:
    from pydoc_data import topics

    for key in sorted(topics.topics):
        text = topics.topics[key]
        if text.strip():
            yield Document(name=f"pydoc:{key}", kind="prose", text=text)


def build_corpus(root: Path | None = None) -> Corpus:
    corpus = Corpus()
    for doc in (*iter_code_documents(root), *iter_prose_documents()):
        (corpus.held_out if is_held_out(doc.name) else corpus.train).append(doc)
    return corpus
