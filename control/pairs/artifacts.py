"""Artifact checks at registration, delegated to `specwire.artifacts` (stdlib-only,
so the control plane stays free of torch/transformers/vllm).

`draft_model` pairs get the full pair check (tokenizer hash, vocab size,
architecture, head dim). Methods without a separate draft LM (`ngram`, `mtp`)
inspect the target only. An EAGLE-1 head (`eagle`) is checked against the target
it reads features from (width, vocabulary, the fc's shape); EAGLE-3 and Medusa
heads are not causal LMs with their own tokenizer, so their directory is digested,
not pair-checked.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from control.errors import InvalidRequest
from specwire import artifacts as engine_artifacts
from specwire.artifacts import ArtifactError

DRAFT_METHODS = frozenset({"draft_model", "eagle", "eagle3", "medusa"})


class PairIncompatible(InvalidRequest):
    code = "pair_incompatible"


@dataclass(frozen=True)
class ArtifactReport:
    target_digest: str
    draft_digest: str | None
    tokenizer_hash: str
    chat_template_hash: str | None


def _refusal(exc: ArtifactError) -> PairIncompatible:
    details: dict[str, object] = {"mismatch": exc.mismatch}
    if exc.param is not None:
        details["param"] = exc.param
    return PairIncompatible(exc.message, code=exc.code, details=details)


class ArtifactOutsideModelRoots(InvalidRequest):
    code = "artifact_outside_model_roots"


def resolve_ref(ref: str, roots: Sequence[Path], param: str) -> str:
    """The real path of `ref` (relative to the working directory), if it lies inside
    one of `roots`; else 422. Checked before anything else touches the path, so a
    caller learns nothing about what exists outside the roots."""
    try:
        resolved = (Path.cwd() / ref).resolve()
        inside = any(resolved.is_relative_to(root) for root in roots)
    except (OSError, RuntimeError, ValueError):  # NUL bytes, symlink loops, surrogates
        inside = False
    if not inside:
        raise ArtifactOutsideModelRoots(
            f"{param} must name a directory inside the configured model roots "
            "(SPECROUTE_MODEL_ROOTS)",
            details={"param": param},
        )
    return str(resolved)


def check_artifacts(
    method: str, target_ref: str, draft_ref: str | None, *, model_roots: Sequence[Path]
) -> ArtifactReport:
    """Digests and hashes of a pair; raises PairIncompatible (422) naming the mismatch."""
    if method in DRAFT_METHODS and draft_ref is None:
        raise PairIncompatible(
            f"method {method} needs a draft_ref",
            details={"param": "draft_ref", "mismatch": "missing_draft"},
        )
    target_ref = resolve_ref(target_ref, model_roots, "target_ref")
    if draft_ref is not None:
        draft_ref = resolve_ref(draft_ref, model_roots, "draft_ref")
    try:
        if method == "draft_model":
            assert draft_ref is not None
            check = engine_artifacts.check_pair(target_ref, draft_ref)
            return ArtifactReport(
                target_digest=check.target.weights_digest,
                draft_digest=check.draft.weights_digest,
                tokenizer_hash=check.tokenizer_hash,
                chat_template_hash=check.chat_template_hash,
            )
        if method == "eagle":
            assert draft_ref is not None
            eagle = engine_artifacts.check_eagle_head(target_ref, draft_ref)
            return ArtifactReport(
                target_digest=eagle.target.weights_digest,
                draft_digest=eagle.head_digest,
                tokenizer_hash=eagle.target.tokenizer_hash,
                chat_template_hash=eagle.target.chat_template_hash,
            )
        target = engine_artifacts.inspect_model(target_ref, "target")
        draft_digest = None
        if draft_ref is not None:
            if not Path(draft_ref).is_dir():
                raise engine_artifacts.MissingArtifactError(
                    f"draft: {draft_ref} is not a directory", "missing_files", "draft_ref"
                )
            draft_digest = engine_artifacts.combined_digest(
                engine_artifacts.weight_digests(Path(draft_ref), "draft")
            )
        return ArtifactReport(
            target_digest=target.weights_digest,
            draft_digest=draft_digest,
            tokenizer_hash=target.tokenizer_hash,
            chat_template_hash=target.chat_template_hash,
        )
    except ArtifactError as exc:
        raise _refusal(exc) from exc


def check_adapter(
    adapter_id: str | None, adapter_ref: str | None, *, model_roots: Sequence[Path]
) -> str | None:
    """The resolved adapter directory, or None without one; 422 when the ref is given
    without an id, lies outside the model roots, or is not a LoRA adapter directory."""
    if adapter_ref is None:
        return None
    if adapter_id is None:
        raise PairIncompatible(
            "adapter_ref needs an adapter_id (the name requests use for it)",
            details={"param": "adapter_id", "mismatch": "missing_adapter_id"},
        )
    resolved = resolve_ref(adapter_ref, model_roots, "adapter_ref")
    if not (Path(resolved) / "adapter_config.json").is_file():
        raise PairIncompatible(
            f"adapter: {adapter_ref} has no adapter_config.json",
            details={"param": "adapter_ref", "mismatch": "missing_files"},
        )
    return resolved
