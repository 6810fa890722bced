"""Normalize a validated request body into RequestFeatures and compatibility facts."""

from dataclasses import dataclass

from control.contract import PairCapabilities, RequestFeatures
from gateway.proxy.schemas import ChatCompletionBody, SamplingParams

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


def has_structured_output(body: SamplingParams) -> bool:
    rf = body.response_format
    if rf is not None and rf.get("type") in ("json_schema", "json_object", "structural_tag"):
        return True
    if body.structured_outputs:
        return True
    extra = body.model_extra or {}
    return any(extra.get(name) is not None for name in _GUIDED_FIELDS)


def request_features(body: SamplingParams, *, tenant: str, task: str | None) -> RequestFeatures:
    max_tokens = body.max_tokens
    if isinstance(body, ChatCompletionBody) and body.max_completion_tokens is not None:
        max_tokens = body.max_completion_tokens
    return RequestFeatures(
        tenant=tenant,
        task=task,
        model=body.model,
        temperature=DEFAULT_TEMPERATURE if body.temperature is None else body.temperature,
        structured_output=has_structured_output(body),
        max_tokens=max_tokens,
    )


@dataclass(frozen=True, slots=True)
class Incompatibility:
    param: str


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
