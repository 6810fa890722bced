"""The settings that reproduce one recorded request, read off its record (no I/O).

What a replay needs besides the prompt (which control never holds): where it ran
(model, adapter, pool and arm, the pair version and the engine build) and how it
sampled (temperature, top_p, top_k, max_tokens, seed, ...). Stop strings, logit
bias and the structured-output schema appear as their digests: the operator
supplies the values and checks them against the digests
(`specwire.digest.canonical_digest`).
"""

from typing import Any

Document = dict[str, Any]

# Where the request ran, in the order they are printed.
ROUTING_FIELDS = (
    "request_id",
    "received_at",
    "endpoint",
    "stream",
    "model",
    "adapter",
    "segment_id",
    "pool_id",
    "arm",
    "pair_version_id",
    "pair",
    "engine_version",
    "engine_build",
    "worker_id",
)
# How it sampled (SamplingSummary's names), in the order they are printed.
SAMPLING_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "max_tokens",
    "n",
    "seed",
    "seed_present",
    "stop_count",
    "stop_digest",
    "logit_bias_count",
    "logit_bias_digest",
    "structured_output",
    "schema_digest",
)


class NotReplayable(Exception):
    """The record has no settings to replay: the request was refused before routing."""


def replay_settings(record: Document) -> Document:
    """The routing fields of `record` (a GET /requests/{id} body) and its sampling
    settings under `sampling`; None where the record has none (an older record
    carries no seed, digests or engine build)."""
    if record.get("arm") is None:
        raise NotReplayable(
            f"request {record.get('request_id')!r} was refused before routing "
            f"({record.get('reason')}, HTTP {record.get('http_status')}): no settings to replay"
        )
    sampling = record.get("sampling") or {}
    settings: Document = {name: record.get(name) for name in ROUTING_FIELDS}
    settings["sampling"] = {name: sampling.get(name) for name in SAMPLING_FIELDS}
    return settings
