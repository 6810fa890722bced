"""Artifact checks at registration, delegated to `engine.artifacts`.

NOTE: `engine.artifacts` is written by the engine team; until it lands (or if
its API differs) this module falls back to the same checks done here from the
model directories' own files: config.json vocab size, tokenizer.json hash and
a sha256 digest over the weights and configs.
"""

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from control.errors import InvalidRequest

DRAFT_METHODS = frozenset({"draft_model", "eagle", "eagle3", "medusa"})
METHODS = frozenset({"draft_model", "ngram", "eagle", "eagle3", "mtp", "medusa"})


class PairIncompatible(InvalidRequest):
    code = "pair_incompatible"


@dataclass(frozen=True)
class ArtifactReport:
    target_digest: str
    draft_digest: str | None
    tokenizer_hash: str
    chat_template_hash: str | None


def _dir(ref: str, role: str) -> Path:
    path = Path(ref)
    if not (path / "config.json").is_file():
        raise PairIncompatible(
            f"{role} {ref!r} is not a model directory with a config.json",
            details={"param": f"{role}_ref", "mismatch": "missing_artifact"},
        )
    return path


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f.relative_to(path).as_posix().encode())
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _tokenizer_hash(path: Path) -> str:
    h = hashlib.sha256()
    for name in ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model"):
        f = path / name
        if f.is_file():
            h.update(name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _chat_template_hash(path: Path) -> str | None:
    f = path / "tokenizer_config.json"
    if not f.is_file():
        return None
    template = json.loads(f.read_text()).get("chat_template")
    return hashlib.sha256(str(template).encode()).hexdigest() if template else None


def _vocab_size(path: Path) -> Any:
    return json.loads((path / "config.json").read_text()).get("vocab_size")


def _local_check(method: str, target_ref: str, draft_ref: str | None) -> ArtifactReport:
    target = _dir(target_ref, "target")
    draft = _dir(draft_ref, "draft") if draft_ref is not None else None
    tokenizer_hash = _tokenizer_hash(target)
    if draft is not None and method == "draft_model":
        if _tokenizer_hash(draft) != tokenizer_hash:
            raise PairIncompatible(
                "draft and target tokenizers differ",
                details={"param": "draft_ref", "mismatch": "tokenizer"},
            )
        if _vocab_size(draft) != _vocab_size(target):
            raise PairIncompatible(
                f"vocab size differs: target {_vocab_size(target)}, draft {_vocab_size(draft)}",
                details={"param": "draft_ref", "mismatch": "vocab_size"},
            )
    return ArtifactReport(
        target_digest=_digest(target),
        draft_digest=_digest(draft) if draft is not None else None,
        tokenizer_hash=tokenizer_hash,
        chat_template_hash=_chat_template_hash(target),
    )


def check_artifacts(method: str, target_ref: str, draft_ref: str | None) -> ArtifactReport:
    """Digests and hashes of a pair; raises PairIncompatible naming the mismatch."""
    if method in DRAFT_METHODS and draft_ref is None:
        raise PairIncompatible(f"method {method} needs a draft_ref", details={"param": "draft_ref"})
    return _local_check(method, target_ref, draft_ref)
