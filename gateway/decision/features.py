"""Normalize a validated request body into RequestFeatures and compatibility facts."""

from dataclasses import dataclass
from typing import Any

from gateway.proxy.schemas import ChatCompletionBody, SamplingParams
from specwire import (
    PairCapabilities,
    PolicySnapshot,
    RequestFeatures,
    SamplingSummary,
    StructuredKind,
)
from specwire.digest import canonical_digest

# OpenAI's documented default when the caller leaves temperature out.
DEFAULT_TEMPERATURE = 1.0

# vLLM's guided-decoding request parameters (older and newer spellings).
_GUIDED_FIELDS = (
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "guided_whitespace_pattern",
)


# vLLM's structured_outputs keys and guided_* fields, by the kind they ask for.
_KIND_OF_KEY: dict[str, StructuredKind] = {
    "json": "json_schema",
    "json_object": "json_object",
    "structural_tag": "structural_tag",
    "regex": "regex",
    "choice": "choice",
    "grammar": "grammar",
    "guided_json": "json_schema",
    "guided_regex": "regex",
    "guided_choice": "choice",
    "guided_grammar": "grammar",
}


def has_structured_output(body: SamplingParams) -> bool:
    rf = body.response_format
    if rf is not None and rf.get("type") in ("json_schema", "json_object", "structural_tag"):
        return True
    if body.structured_outputs:
        return True
    extra = body.model_extra
    if not extra:
        return False  # NOTE: most bodies: no guided_* lookups (four calls a request)
    return any(extra.get(name) is not None for name in _GUIDED_FIELDS)


def structured_kind(body: SamplingParams) -> StructuredKind | None:
    """Which kind of structured output the request asks for (the kind, never the schema)."""
    if not has_structured_output(body):
        return None
    rf_type = (body.response_format or {}).get("type")
    if rf_type == "json_schema":
        return "json_schema"
    if rf_type in ("json_object", "structural_tag"):
        return _KIND_OF_KEY[str(rf_type)]
    for key, value in (body.structured_outputs or {}).items():
        if value is not None and key in _KIND_OF_KEY:
            return _KIND_OF_KEY[key]
    extra = body.model_extra or {}
    for name in _GUIDED_FIELDS:
        if extra.get(name) is not None and name in _KIND_OF_KEY:
            return _KIND_OF_KEY[name]
    return "json_schema"  # asked in a spelling not listed above


def structured_constraint(body: SamplingParams) -> dict[str, Any] | None:
    """The fields that constrain the output's structure, by name, as sent (None: none).
    Only ever digested: a schema can hold the caller's text."""
    if not has_structured_output(body):
        return None
    extra = body.model_extra or {}
    fields: dict[str, Any] = {
        "response_format": body.response_format,
        "structured_outputs": body.structured_outputs or None,
        **{name: extra.get(name) for name in _GUIDED_FIELDS},
    }
    return {name: value for name, value in fields.items() if value is not None}


def _digest_or_none(value: Any) -> str | None:
    if not value:
        return None
    try:
        return canonical_digest(value)
    except ValueError:
        # NOTE: a NaN or infinite number (Python's JSON parser lets them through) has
        # no canonical JSON; such a value is recorded as absent rather than guessed.
        return None


def _seed(body: SamplingParams) -> int | None:
    seed = body.seed
    return seed if seed is not None and -(2**63) <= seed < 2**63 else None


def effective_max_tokens(body: SamplingParams) -> int | None:
    if isinstance(body, ChatCompletionBody) and body.max_completion_tokens is not None:
        return body.max_completion_tokens
    return body.max_tokens


def sampling_summary(body: SamplingParams) -> SamplingSummary:
    """The distribution settings a record keeps: numbers, flags, counts and digests of
    whatever could be text (stop strings, logit bias, the structured-output schema)."""
    stop = body.stop
    stops = [stop] if isinstance(stop, str) else stop
    return SamplingSummary(
        temperature=body.temperature,
        top_p=body.top_p,
        top_k=body.top_k,
        min_p=body.min_p,
        presence_penalty=body.presence_penalty,
        frequency_penalty=body.frequency_penalty,
        repetition_penalty=body.repetition_penalty,
        seed_present=body.seed is not None,
        seed=_seed(body),
        max_tokens=effective_max_tokens(body),
        n=body.n,
        stop_count=(1 if isinstance(stop, str) else len(stop)) if stop else 0,
        logit_bias_count=len(body.logit_bias or {}),
        structured_output=structured_kind(body),
        stop_digest=_digest_or_none(stops),
        logit_bias_digest=_digest_or_none(body.logit_bias),
        schema_digest=_digest_or_none(structured_constraint(body)),
    )


def request_features(
    body: SamplingParams,
    *,
    tenant: str,
    task: str | None,
    snapshot: PolicySnapshot | None = None,
) -> RequestFeatures:
    """As vLLM's API does, a request selects a LoRA adapter by naming it as its model:
    the features then carry the base model and the adapter separately."""
    max_tokens = effective_max_tokens(body)
    base = snapshot.adapter_base(body.model) if snapshot is not None else None
    return RequestFeatures(
        tenant=tenant,
        task=task,
        model=base if base is not None else body.model,
        adapter=body.model if base is not None else None,
        temperature=DEFAULT_TEMPERATURE if body.temperature is None else body.temperature,
        structured_output=has_structured_output(body),
        max_tokens=max_tokens,
    )


@dataclass(frozen=True, slots=True)
class Incompatibility:
    param: str


def seed_not_reproducible(
    body: SamplingParams, features: RequestFeatures, capabilities: PairCapabilities
) -> bool:
    """A seeded request that samples (temperature > 0, OpenAI's default 1 when unset),
    which the spec pool would not answer reproducibly. NOTE: measured on vLLM 0.32 CPU
    engines: three calls with seed=1234 at T=1 give one text on the baseline engine and
    three on the speculating one (tests/gateway/test_seeded_vllm.py)."""
    return body.seed is not None and features.temperature > 0 and not capabilities.seeded_sampling


def spec_incompatibility(
    body: SamplingParams, capabilities: PairCapabilities
) -> Incompatibility | None:
    """The first parameter the spec pool cannot serve losslessly, if any.

    Neutral values (min_p=0, an empty logit_bias, zero penalties, repetition 1.0)
    change nothing in sampling, so they do not force the baseline arm.
    """
    if body.min_p:
        return Incompatibility("min_p")
    if body.logit_bias:
        return Incompatibility("logit_bias")
    if not capabilities.structured_output and has_structured_output(body):
        return Incompatibility("structured_output")
    if not capabilities.penalties:
        if body.presence_penalty:
            return Incompatibility("presence_penalty")
        if body.frequency_penalty:
            return Incompatibility("frequency_penalty")
        if body.repetition_penalty is not None and body.repetition_penalty != 1.0:
            return Incompatibility("repetition_penalty")
    return None
