"""What the client may see of an engine document, and what the gateway reads from it.

An allow-list of OpenAI response fields rather than a deny-list of engine ones:
a new engine-internal field (vLLM adds them release by release) cannot leak.
"""

from dataclasses import dataclass, replace
from typing import Any

from gateway.telemetry.positions import PositionCounts, by_response_position
from specwire.draft_bounds import first_position_over_drafts

_TOP_LEVEL = frozenset(
    {"id", "object", "created", "model", "choices", "usage", "system_fingerprint", "service_tier"}
)
_CHOICE = frozenset({"index", "delta", "message", "text", "logprobs", "finish_reason"})


def sanitize(doc: dict[str, Any], *, keep_usage: bool = True) -> dict[str, Any]:
    out = {k: v for k, v in doc.items() if k in _TOP_LEVEL}
    if not keep_usage:
        out.pop("usage", None)
    choices = out.get("choices")
    if isinstance(choices, list):
        out["choices"] = [
            {k: v for k, v in c.items() if k in _CHOICE} if isinstance(c, dict) else c
            for c in choices
        ]
    return out


def is_clean(doc: dict[str, Any], *, keep_usage: bool = True) -> bool:
    """Whether sanitize(doc) would return doc unchanged, without building a copy."""
    if not doc.keys() <= _TOP_LEVEL or (not keep_usage and "usage" in doc):
        return False
    choices = doc.get("choices")
    if isinstance(choices, list):
        for c in choices:
            if isinstance(c, dict) and not c.keys() <= _CHOICE:
                return False
    return True


@dataclass(frozen=True, slots=True)
class SpecStats:
    """One request's speculative work, from vLLM's metrics.speculative_decoding."""

    drafts: int
    drafted_tokens: int
    accepted_tokens: int
    accepted_per_position: tuple[int, ...]
    # (drafted, accepted) per response-position bucket (gateway.telemetry.positions);
    # None: the engine sent no per-step arrays (not `detailed`).
    by_response_position: PositionCounts | None = None


NO_SPEC = SpecStats(0, 0, 0, ())


def spec_stats(doc: dict[str, Any]) -> SpecStats | None:
    metrics = doc.get("metrics")
    sd = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if not isinstance(sd, dict):
        return None
    try:
        # histogram[j] = verify steps that accepted exactly j draft tokens; acceptance is
        # a prefix, so position i was accepted in every step with j > i.
        histogram = [int(c) for c in sd.get("acceptance_histogram", [])]
        per_position = tuple(sum(histogram[i + 1 :]) for i in range(max(len(histogram) - 1, 0)))
        steps_accepted, steps_drafted = sd.get("per_step_accepted"), sd.get("per_step_drafted")
        by_position = None
        if isinstance(steps_accepted, list) and isinstance(steps_drafted, list):
            by_position = by_response_position(
                [int(a) for a in steps_accepted], [int(d) for d in steps_drafted]
            )
        stats = SpecStats(
            drafts=int(sd.get("num_spec_steps", sum(histogram))),
            drafted_tokens=int(sd.get("num_draft_tokens", 0)),
            accepted_tokens=int(sd.get("num_accepted_draft_tokens", sum(per_position))),
            accepted_per_position=per_position,
            by_response_position=by_position,
        )
    except (TypeError, ValueError):
        return None
    # NOTE: counts the telemetry contract refuses (negative, more tokens accepted than
    # drafted, a draft position accepted in more proposals than there were) would make
    # control refuse the gateway's whole batch: no stats instead.
    counts = (stats.drafts, stats.drafted_tokens, stats.accepted_tokens, *per_position)
    if (
        min(counts) < 0
        or stats.accepted_tokens > stats.drafted_tokens
        or first_position_over_drafts(per_position, stats.drafts) is not None
    ):
        return None
    if by_position is not None and _totals(by_position) != (
        stats.drafted_tokens,
        stats.accepted_tokens,
    ):
        # NOTE: a window's response-position buckets must add up to its totals (control
        # refuses the batch otherwise): per-step arrays that do not are not positions,
        # and the request counts whole in `unknown`, as from a `summary` engine.
        return replace(stats, by_response_position=None)
    return stats


def _totals(by_position: PositionCounts) -> tuple[int, int]:
    return sum(d for d, _ in by_position), sum(a for _, a in by_position)


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


def usage_of(doc: dict[str, Any]) -> Usage | None:
    usage = doc.get("usage")
    if not isinstance(usage, dict):
        return None
    try:
        counted = Usage(
            int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        )
    except (TypeError, ValueError):
        return None
    # NOTE: a negative count is no usage: it would credit the tenant's quota and make
    # the window's token totals smaller than the requests they count.
    if counted.prompt_tokens < 0 or counted.completion_tokens < 0:
        return None
    return counted
