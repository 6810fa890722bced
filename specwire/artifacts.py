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
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# vLLM's CPU attention backend supports only these; GPU backends accept more,
# so callers registering GPU-only pairs may pass their own set.
CPU_HEAD_DIMS: frozenset[int] = frozenset({32, 64, 128})
REQUIRED_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
_CHUNK = 1 << 20
BUNDLED_PAIR_DIR = Path(__file__).resolve().parents[1] / "engine" / "tiny_pair"
"""The tiny draft-target pair shipped in the package (a default model root)."""
MODEL_ROOTS_ENV = "SPECROUTE_MODEL_ROOTS"
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


class MalformedArtifactError(ArtifactError):
    """A file parses but a field has the wrong shape; the message names file and field."""

    code = "malformed_artifact"


def _malformed(role: str, file: str, field: str, problem: str) -> MalformedArtifactError:
    return MalformedArtifactError(
        f"{role}: {file}: {field} {problem}", f"malformed:{file}:{field}", f"{role}_ref"
    )


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


def default_model_roots() -> list[Path]:
    """The directories model paths must resolve inside, when none are configured:
    `models` under the working directory, the bundled tiny pair and
    $SPECROUTE_TINY_PAIR_DIR if set."""
    roots = [Path.cwd() / "models", BUNDLED_PAIR_DIR]
    override = os.environ.get("SPECROUTE_TINY_PAIR_DIR")
    if override:
        roots.append(Path(override))
    return [root.resolve() for root in roots]


def model_roots_from_env() -> list[Path]:
    """$SPECROUTE_MODEL_ROOTS (a JSON list of directories, as control reads it), else
    the defaults. Raises ValueError when the variable is set but not such a list."""
    raw = os.environ.get(MODEL_ROOTS_ENV)
    if not raw:
        return default_model_roots()
    try:
        roots = json.loads(raw)
    except ValueError:
        roots = None
    if not isinstance(roots, list) or not all(isinstance(r, str) and r for r in roots):
        raise ValueError(f"{MODEL_ROOTS_ENV} must be a JSON list of directories")
    return [Path(root).resolve() for root in roots]


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
    except (OSError, ValueError, RecursionError) as exc:
        # NOTE: the exception's text only (no path): the message must not echo more of
        # the server's file system than the file name the caller already knows.
        reason = type(exc).__name__ if isinstance(exc, OSError) else str(exc)[:200]
        raise MissingArtifactError(
            f"{role}: {path.name} is unreadable ({reason})", "unreadable_file", f"{role}_ref"
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


def _special_tokens(
    tokenizer_config: dict[str, Any], model_dir: Path, role: str
) -> dict[str, str | None]:
    declared: dict[str, tuple[str, Any]] = {
        k: ("tokenizer_config.json", v) for k, v in tokenizer_config.items()
    }
    special_map = model_dir / "special_tokens_map.json"
    if special_map.is_file():
        declared.update(
            (k, ("special_tokens_map.json", v)) for k, v in _read_json(special_map, role).items()
        )
    out: dict[str, str | None] = {}
    for key in _SPECIAL_TOKEN_KEYS:
        file, value = declared.get(key, ("", None))
        # Older files store AddedToken dicts ({"content": ...}) instead of strings.
        if isinstance(value, dict):
            value = value.get("content")
        if value is not None and not isinstance(value, str):
            raise _malformed(role, file, key, 'is neither a string nor {"content": string}')
        out[key] = value
    return out


def _added_tokens(tok: dict[str, Any], role: str) -> list[dict[str, Any]]:
    raw = tok.get("added_tokens", [])
    if not isinstance(raw, list):
        raise _malformed(role, "tokenizer.json", "added_tokens", "is not a list")
    added = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict):
            raise _malformed(role, "tokenizer.json", f"added_tokens[{i}]", "is not an object")
        if not _is_token_id(t.get("id")) or not isinstance(t.get("content"), str):
            raise _malformed(
                role,
                "tokenizer.json",
                f"added_tokens[{i}]",
                "needs an integer id >= 0 and a string content",
            )
        added.append(
            {k: t.get(k) for k in ("id", "content", "special", "normalized", "lstrip", "rstrip")}
        )
    return sorted(added, key=lambda t: (t["id"], t["content"]))


def _is_token_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def tokenizer_fingerprint(
    model_dir: Path, role: str = "model"
) -> tuple[str, int, dict[str, str | None]]:
    """(sha256 hex, vocab size, special tokens) of a directory's tokenizer."""
    tok = _read_json(model_dir / "tokenizer.json", role)
    config = _read_json(model_dir / "tokenizer_config.json", role)
    special = _special_tokens(config, model_dir, role)
    added = _added_tokens(tok, role)
    canonical = {key: tok.get(key) for key in _TOKENIZER_KEYS}
    if isinstance(canonical["model"], dict):
        canonical["model"] = _normalized_model(canonical["model"])
    canonical["added_tokens"] = added
    canonical["special_tokens"] = special
    ids = [t["id"] for t in added]
    vocab = canonical["model"].get("vocab") if isinstance(canonical["model"], dict) else None
    if isinstance(vocab, dict):
        for piece, token_id in vocab.items():
            if not _is_token_id(token_id):
                raise _malformed(
                    role,
                    "tokenizer.json",
                    f"model.vocab[{piece[:40]!r}]",
                    "is not an integer id >= 0",
                )
            ids.append(token_id)
    elif isinstance(vocab, list):  # Unigram: [[piece, score], ...], ids are positions
        ids.append(len(vocab) - 1)
    vocab_size = max(ids) + 1 if ids else 0
    try:
        digest = hashlib.sha256(_canonical(canonical)).hexdigest()
    except (ValueError, RecursionError) as exc:  # lone surrogates, absurd nesting
        raise _malformed(
            role, "tokenizer.json", "model", f"cannot be canonicalized ({exc})"
        ) from exc
    return digest, vocab_size, special


def chat_template_hash(model_dir: Path, role: str = "model") -> str | None:
    jinja = model_dir / "chat_template.jinja"
    if jinja.is_file():
        return hashlib.sha256(jinja.read_bytes()).hexdigest()
    config_path = model_dir / "tokenizer_config.json"
    if not config_path.is_file():
        return None
    template = _read_json(config_path, role).get("chat_template")
    if not template:
        return None
    try:
        text = template if isinstance(template, str) else _canonical(template).decode()
        return hashlib.sha256(text.encode()).hexdigest()
    except (ValueError, RecursionError) as exc:
        raise _malformed(
            role, "tokenizer_config.json", "chat_template", "cannot be encoded"
        ) from exc


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
    where = "text_config." if text is not config else ""

    def positive(name: str, default: int | None = None) -> int:
        value = text.get(name)
        if value is None and default is not None:
            return default
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise UnsupportedArchitectureError(
                f"{role}: config.json: {where}{name} must be a positive integer, got "
                f"{json.dumps(value)[:40]}",
                f"config:{name}",
                f"{role}_ref",
            )
        return value

    hidden = positive("hidden_size")
    heads = positive("num_attention_heads")
    architectures = config.get("architectures") or []
    if not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures):
        raise _malformed(role, "config.json", "architectures", "is not a list of strings")
    model_type = config.get("model_type")
    max_positions = text.get("max_position_embeddings")
    return ArchitectureFacts(
        architectures=tuple(architectures),
        model_type=model_type if isinstance(model_type, str) else None,
        hidden_size=hidden,
        num_hidden_layers=positive("num_hidden_layers"),
        num_attention_heads=heads,
        num_key_value_heads=positive("num_key_value_heads", heads),
        head_dim=positive("head_dim", hidden // heads or 1),
        vocab_size=positive("vocab_size"),
        max_position_embeddings=positive("max_position_embeddings")
        if max_positions is not None
        else None,
    )


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
        chat_template_hash=chat_template_hash(path, role),
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


@dataclass(frozen=True)
class EagleHeadCheck:
    target: ModelArtifacts
    head_digest: str
    layers: int


def safetensors_shapes(path: Path, role: str) -> dict[str, list[int]]:
    """Tensor name -> shape, read from a safetensors header (no torch needed)."""
    try:
        with path.open("rb") as f:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size <= 100 * _CHUNK:
                raise _malformed(role, path.name, "header", f"has an implausible size {size}")
            header = json.loads(f.read(size))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise _malformed(role, path.name, "header", f"cannot be read ({exc})") from exc
    if not isinstance(header, dict):
        raise _malformed(role, path.name, "header", "is not an object")
    return {
        name: list(entry.get("shape", []))
        for name, entry in header.items()
        if name != "__metadata__" and isinstance(entry, dict)
    }


def check_eagle_head(
    target_dir: Path | str,
    head_dir: Path | str,
    supported_head_dims: frozenset[int] = CPU_HEAD_DIMS,
) -> EagleHeadCheck:
    """Refuse an EAGLE-1 head vLLM could not draft with for this target.

    The head (vLLM's ``EagleLlamaForCausalLM``) reads the target's final hidden
    state and shares its embeddings and LM head, so its width and vocabulary must be
    the target's, and its ``fc`` must map [embedding, feature] (2 x hidden) to hidden.
    """
    target = inspect_model(target_dir, "target")
    _check_model(target, "target", supported_head_dims)
    path = Path(head_dir)
    if not (path / "config.json").is_file():
        raise MissingArtifactError(
            f"draft: missing files in {path}: config.json", "missing_files", "draft_ref"
        )
    head = architecture_facts(path, "draft")
    t = target.architecture
    for name, mine, theirs in (
        ("hidden_size", head.hidden_size, t.hidden_size),
        ("vocab_size", head.vocab_size, t.vocab_size),
    ):
        if mine != theirs:
            raise IncompatiblePairError(
                f"EAGLE head {name} {mine} differs from the target's {theirs}", name, "draft_ref"
            )
    if head.head_dim not in supported_head_dims:
        raise UnsupportedArchitectureError(
            f"draft: head_dim {head.head_dim} is not supported "
            f"(supported: {sorted(supported_head_dims)})",
            "head_dim",
            "draft_ref",
        )
    shapes: dict[str, list[int]] = {}
    for file in sorted(path.glob("*.safetensors")):
        shapes |= safetensors_shapes(file, "draft")
    fc = shapes.get("fc.weight")
    if fc != [t.hidden_size, 2 * t.hidden_size]:
        raise IncompatiblePairError(
            f"EAGLE head fc.weight has shape {fc}, expected "
            f"[{t.hidden_size}, {2 * t.hidden_size}] (hidden -> [embedding, feature])",
            "eagle_fc",
            "draft_ref",
        )
    return EagleHeadCheck(
        target=target,
        head_digest=combined_digest(weight_digests(path, "draft")),
        layers=head.num_hidden_layers,
    )
