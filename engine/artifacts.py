"""What makes two model directories a valid draft-target pair.

The control plane calls :func:`check_pair` when a pair version is registered,
so this module stays import-light: standard library only (no torch,
transformers or vllm). It reads the HF-format files of each model directory and
computes

- a tokenizer hash: sha256 of a canonical form of tokenizer.json (sorted-key
  JSON of model/vocab/merges, normalizer, pre-tokenizer, post-processor,
  decoder and added tokens) plus the declared special tokens;
- the vocabulary size, from the tokenizer and from config.json;
- a chat-template hash;
- sha256 digests of the weight files, streamed;
- architecture facts from config.json.

An incompatible pair raises a typed :class:`ArtifactError` whose ``mismatch``
names what differs, so the caller can render an OpenAI-style error body.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# vLLM's CPU attention backend supports only these; GPU backends accept more,
# so callers registering GPU-only pairs may pass their own set.
CPU_HEAD_DIMS: frozenset[int] = frozenset({32, 64, 128})
REQUIRED_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
_CHUNK = 1 << 20
# Parts of tokenizer.json that decide which ids a text maps to (and back).
_TOKENIZER_KEYS = ("model", "normalizer", "pre_tokenizer", "post_processor", "decoder")
_SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "pad_token", "unk_token")


class ArtifactError(Exception):
    """A pair that cannot be registered. ``mismatch`` names the failed check."""

    status_code = 422
    error_type = "invalid_request_error"
    code = "pair_incompatible"

    def __init__(self, message: str, mismatch: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.mismatch = mismatch
        self.param = param

    def to_error_body(self) -> dict[str, Any]:
        """The OpenAI-style body ``{"error": {"message", "type", "code", "param"}}``."""
        return {
            "error": {
                "message": self.message,
                "type": self.error_type,
                "code": self.code,
                "param": self.param,
            }
        }


class MissingArtifactError(ArtifactError):
    code = "missing_artifact"


class IncompatiblePairError(ArtifactError):
    code = "pair_incompatible"


class UnsupportedArchitectureError(ArtifactError):
    code = "unsupported_architecture"


@dataclass(frozen=True)
class ArchitectureFacts:
    architectures: tuple[str, ...]
    model_type: str | None
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int | None


@dataclass(frozen=True)
class ModelArtifacts:
    path: str
    tokenizer_hash: str
    tokenizer_vocab_size: int  # highest token id + 1, added tokens included
    special_tokens: dict[str, str | None]
    chat_template_hash: str | None
    weight_digests: dict[str, str]  # relative file name -> sha256 hex
    weights_digest: str  # sha256 over the sorted (name, digest) list
    architecture: ArchitectureFacts


@dataclass(frozen=True)
class PairCheck:
    target: ModelArtifacts
    draft: ModelArtifacts
    tokenizer_hash: str
    vocab_size: int
    chat_template_hash: str | None
    warnings: list[str] = field(default_factory=list)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _read_json(path: Path, role: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MissingArtifactError(
            f"{role}: {path.name} is unreadable ({exc})", "unreadable_file", f"{role}_ref"
        ) from exc
    if not isinstance(data, dict):
        raise MissingArtifactError(
            f"{role}: {path.name} is not a JSON object", "unreadable_file", f"{role}_ref"
        )
    return data


def _normalized_model(model: dict[str, Any]) -> dict[str, Any]:
    """tokenizers writes BPE merges as "a b" strings or as [a, b] pairs depending on version."""
    out = dict(model)
    merges = out.get("merges")
    if isinstance(merges, list):
        out["merges"] = [" ".join(m) if isinstance(m, list) else m for m in merges]
    return out


def _special_tokens(tokenizer_config: dict[str, Any], model_dir: Path) -> dict[str, str | None]:
    declared: dict[str, Any] = dict(tokenizer_config)
    special_map = model_dir / "special_tokens_map.json"
    if special_map.is_file():
        declared.update(json.loads(special_map.read_text(encoding="utf-8")))
    out: dict[str, str | None] = {}
    for key in _SPECIAL_TOKEN_KEYS:
        value = declared.get(key)
        # Older files store AddedToken dicts ({"content": ...}) instead of strings.
        out[key] = value.get("content") if isinstance(value, dict) else value
    return out


def tokenizer_fingerprint(
    model_dir: Path, role: str = "model"
) -> tuple[str, int, dict[str, str | None]]:
    """(sha256 hex, vocab size, special tokens) of a directory's tokenizer."""
    tok = _read_json(model_dir / "tokenizer.json", role)
    config = _read_json(model_dir / "tokenizer_config.json", role)
    special = _special_tokens(config, model_dir)
    added = sorted(
        (
            {k: t.get(k) for k in ("id", "content", "special", "normalized", "lstrip", "rstrip")}
            for t in tok.get("added_tokens", [])
        ),
        key=lambda t: (t["id"], t["content"]),
    )
    canonical = {key: tok.get(key) for key in _TOKENIZER_KEYS}
    if isinstance(canonical["model"], dict):
        canonical["model"] = _normalized_model(canonical["model"])
    canonical["added_tokens"] = added
    canonical["special_tokens"] = special
    ids = [t["id"] for t in added if isinstance(t["id"], int)]
    vocab = canonical["model"].get("vocab") if isinstance(canonical["model"], dict) else None
    if isinstance(vocab, dict):
        ids.extend(int(i) for i in vocab.values())
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...], ids are positions
        ids.append(len(vocab) - 1)
    vocab_size = max(ids) + 1 if ids else 0
    return hashlib.sha256(_canonical(canonical)).hexdigest(), vocab_size, special


def chat_template_hash(model_dir: Path) -> str | None:
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        return hashlib.sha256(jinja.read_bytes()).hexdigest()
    config_path = model_dir / "tokenizer_config.json"
    if not config_path.is_file():
        return None
    template = json.loads(config_path.read_text(encoding="utf-8")).get("chat_template")
    if not template:
        return None
    text = template if isinstance(template, str) else _canonical(template).decode()
    return hashlib.sha256(text.encode()).hexdigest()


def weight_digests(model_dir: Path, role: str = "model") -> dict[str, str]:
    files = sorted(
        p for p in model_dir.rglob("*") if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES)
    )
    if not files:
        raise MissingArtifactError(
            f"{role}: no weight files ({', '.join(WEIGHT_SUFFIXES)}) in {model_dir}",
            "missing_files",
            f"{role}_ref",
        )
    return {p.relative_to(model_dir).as_posix(): sha256_file(p) for p in files}


def combined_digest(digests: dict[str, str]) -> str:
    lines = "".join(f"{name}\0{digest}\n" for name, digest in sorted(digests.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def architecture_facts(model_dir: Path, role: str = "model") -> ArchitectureFacts:
    config = _read_json(model_dir / "config.json", role)
    # Multimodal configs nest the language model's fields.
    nested = config.get("text_config")
    text: dict[str, Any] = nested if isinstance(nested, dict) else config
    try:
        hidden = int(text["hidden_size"])
        heads = int(text["num_attention_heads"])
        facts = ArchitectureFacts(
            architectures=tuple(config.get("architectures") or ()),
            model_type=config.get("model_type"),
            hidden_size=hidden,
            num_hidden_layers=int(text["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=int(text.get("num_key_value_heads") or heads),
            head_dim=int(text.get("head_dim") or hidden // heads),
            vocab_size=int(text["vocab_size"]),
            max_position_embeddings=text.get("max_position_embeddings"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UnsupportedArchitectureError(
            f"{role}: config.json lacks a usable {exc}", "config", f"{role}_ref"
        ) from exc
    return facts


def inspect_model(model_dir: Path | str, role: str = "model") -> ModelArtifacts:
    path = Path(model_dir)
    if not path.is_dir():
        raise MissingArtifactError(
            f"{role}: {path} is not a directory", "missing_files", f"{role}_ref"
        )
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise MissingArtifactError(
            f"{role}: missing files in {path}: {', '.join(missing)}", "missing_files", f"{role}_ref"
        )
    tokenizer_hash, tokenizer_vocab, special = tokenizer_fingerprint(path, role)
    digests = weight_digests(path, role)
    return ModelArtifacts(
        path=str(path),
        tokenizer_hash=tokenizer_hash,
        tokenizer_vocab_size=tokenizer_vocab,
        special_tokens=special,
        chat_template_hash=chat_template_hash(path),
        weight_digests=digests,
        weights_digest=combined_digest(digests),
        architecture=architecture_facts(path, role),
    )


def _check_model(m: ModelArtifacts, role: str, head_dims: frozenset[int]) -> None:
    arch = m.architecture
    if not any(a.endswith("ForCausalLM") for a in arch.architectures):
        raise UnsupportedArchitectureError(
            f"{role}: architectures {list(arch.architectures)} has no *ForCausalLM",
            "architecture",
            f"{role}_ref",
        )
    if arch.head_dim not in head_dims:
        raise UnsupportedArchitectureError(
            f"{role}: head_dim {arch.head_dim} is not supported (supported: {sorted(head_dims)})",
            "head_dim",
            f"{role}_ref",
        )
    if m.tokenizer_vocab_size > arch.vocab_size:
        raise IncompatiblePairError(
            f"{role}: tokenizer has {m.tokenizer_vocab_size} ids but the embedding only "
            f"{arch.vocab_size}",
            "vocab_size",
            f"{role}_ref",
        )


def check_pair(
    target_dir: Path | str,
    draft_dir: Path | str,
    supported_head_dims: frozenset[int] = CPU_HEAD_DIMS,
) -> PairCheck:
    """Inspect both directories and refuse a pair vLLM could not speculate with."""
    target = inspect_model(target_dir, "target")
    draft = inspect_model(draft_dir, "draft")
    _check_model(target, "target", supported_head_dims)
    _check_model(draft, "draft", supported_head_dims)
    if target.tokenizer_hash != draft.tokenizer_hash:
        raise IncompatiblePairError(
            f"tokenizer hash differs: target {target.tokenizer_hash[:12]}, "
            f"draft {draft.tokenizer_hash[:12]}",
            "tokenizer_hash",
            "draft_ref",
        )
    if target.architecture.vocab_size != draft.architecture.vocab_size:
        raise IncompatiblePairError(
            f"vocab size differs: target {target.architecture.vocab_size}, "
            f"draft {draft.architecture.vocab_size}",
            "vocab_size",
            "draft_ref",
        )
    warnings = []
    t_pos = target.architecture.max_position_embeddings
    d_pos = draft.architecture.max_position_embeddings
    if t_pos is not None and d_pos is not None and d_pos < t_pos:
        warnings.append(f"draft max positions {d_pos} < target {t_pos}: context is capped")
    if target.chat_template_hash != draft.chat_template_hash:
        # vLLM renders chat with the target's tokenizer, so this is only informative.
        warnings.append("chat templates differ; the target's is used")
    return PairCheck(
        target=target,
        draft=draft,
        tokenizer_hash=target.tokenizer_hash,
        vocab_size=target.architecture.vocab_size,
        chat_template_hash=target.chat_template_hash,
        warnings=warnings,
    )
