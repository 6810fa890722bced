"""Per-request records: what support needs to tell one request's story, and no text.

The gateway ships these inside its telemetry batches (`TelemetryBatch.requests`),
sampled per tenant; control keeps them for a retention period. Privacy by
construction: no field can hold prompt, completion or stop text. Sampling
settings are kept as numbers, flags, counts and digests: a stop list becomes its
length and the digest of the list, logit bias its count and digest, a JSON schema
its kind and the digest of the structured-output constraint
(`specwire.digest.canonical_digest`). A digest tells whether two requests
used the same settings; it does not hide a low-entropy value (docs/security.md).

A request the gateway refused before routing it (bad key, invalid body, unknown or
forbidden model, bad override header) has a record too: no arm, reason
`not_routed`, its typed error code, the tenant when the key was recognised, and no
model (the name it sent is the caller's text until it names a served model).

Accepted draft tokens are a subset of the drafted ones, as in the telemetry window:
`accepted_tokens <= drafted_tokens` and `accepted_per_position[j] <= drafts`
(`specwire.draft_bounds`); control refuses a record that says otherwise.
"""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from specwire.digest import DIGEST_LENGTH, DIGEST_PATTERN
from specwire.draft_bounds import at_most_drafted, positions_at_most_drafts
from specwire.features import Arm

# Bounded kinds of structured output (vLLM's and OpenAI's spellings, normalized).
StructuredKind = Literal[
    "json_schema", "json_object", "structural_tag", "regex", "choice", "grammar"
]
# How a request ended: `ok`; `cancelled` (the client left, HTTP 499); `client_error`:
# refused for the request's own fault (a 4xx answer: the engine refused an invalid
# request, the tenant's quota is spent, a bad key or body); `error`: anything else
# that failed it (an engine fault or 5xx, a timeout, a broken stream, no worker).
# Only `error` counts against an arm.
Outcome = Literal["ok", "error", "client_error", "cancelled"]
Endpoint = Literal["chat", "completions"]
# The reason of a record for a request refused before routing (it has no arm).
NOT_ROUTED = "not_routed"


def failure_outcome(http_status: int) -> Outcome:
    """The outcome of a request that failed with `http_status`: a 4xx is the request's
    own fault (`client_error`), whichever arm happened to carry it; anything else is
    the serving side's (`error`). A client that left is `cancelled`, set where that is
    seen, not here."""
    return "client_error" if 400 <= http_status < 500 else "error"


def _digest_field(of: str) -> Any:
    return Field(
        default=None,
        max_length=DIGEST_LENGTH,
        pattern=DIGEST_PATTERN,
        description=f"canonical_digest of {of}; None: none sent.",
    )


class SamplingSummary(BaseModel):
    """The request's distribution settings, enough to reproduce them; never their text."""

    temperature: float | None = Field(default=None, description="As sent; None: default.")
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    seed_present: bool = Field(default=False, description="A seed was sent.")
    seed: int | None = Field(
        default=None,
        ge=-(2**63),
        le=2**63 - 1,
        description="The sampling seed as sent; None: none, or outside 64-bit range.",
    )
    max_tokens: int | None = None
    n: int | None = None
    stop_count: int = Field(default=0, ge=0, description="Number of stop strings.")
    logit_bias_count: int = Field(default=0, ge=0, description="Number of biased tokens.")
    structured_output: StructuredKind | None = None
    stop_digest: str | None = _digest_field("the stop strings (a list, as sent)")
    logit_bias_digest: str | None = _digest_field("the logit_bias map")
    schema_digest: str | None = _digest_field(
        "the structured-output constraint (response_format, structured_outputs or "
        "guided_* fields, by name)"
    )


class RequestRecordDoc(BaseModel):
    request_id: str = Field(min_length=1, max_length=128)
    received_at: datetime = Field(description="When the gateway received the request (UTC).")
    tenant_id: int | None = Field(description="None: refused before the key was recognised.")
    tenant: str | None = Field(max_length=100)
    endpoint: Endpoint
    stream: bool = Field(description="False also when refused before the body was read.")
    model: str | None = Field(
        max_length=256, description="The model the request named; None: not routed."
    )
    adapter: str | None = Field(default=None, max_length=256, description="LoRA adapter, if any.")
    segment_id: int | None = None
    segment: str | None = Field(default=None, max_length=200)
    rollout_id: int | None = Field(
        default=None, description="The rollout governing the segment, whatever the reason."
    )
    rollout_version: int | None = None
    pair_version_id: int | None = None
    pair: str | None = Field(default=None, max_length=200, description="Pair version label.")
    arm: Arm | None = Field(description="None: refused before routing.")
    reason: str = Field(
        max_length=64, description=f"The decision reason (decision header); {NOT_ROUTED!r}."
    )
    pool_id: int | None = None
    worker_id: str | None = Field(default=None, max_length=200)
    engine_version: str | None = Field(
        default=None, max_length=50, description="The engine version the pair was validated on."
    )
    engine_build: str | None = Field(
        default=None,
        max_length=200,
        description="What the serving worker's agent reported: the engine's version and "
        "the specroute build around it. None: no worker, or it did not report one.",
    )
    sampling: SamplingSummary = Field(default_factory=SamplingSummary)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    drafts: int = Field(default=0, ge=0)
    drafted_tokens: int = Field(default=0, ge=0)
    accepted_tokens: int = Field(
        default=0, ge=0, description="Of drafted_tokens, those the target accepted."
    )
    accepted_per_position: list[int] = Field(
        default_factory=list,
        max_length=64,
        description="Proposals that accepted draft position j (0-based): at most drafts.",
    )
    ttft_ms: float | None = Field(default=None, ge=0)
    tpot_ms: float | None = Field(default=None, ge=0)
    e2e_ms: float = Field(ge=0)
    outcome: Outcome
    http_status: int = Field(ge=100, le=599)
    error_code: str | None = Field(default=None, max_length=64, description="Typed error code.")

    # NOTE: as the telemetry window's: control refuses a record whose acceptance is not
    # a subset of its drafts (the gateway's sanitize step never sends one).
    _accepted_at_most_drafted = field_validator("accepted_tokens")(at_most_drafted)
    _positions_at_most_drafts = field_validator("accepted_per_position")(positions_at_most_drafts)
