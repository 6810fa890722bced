"""Acceptance by response position: where in the response each draft step happened.

With `--per-request-spec-decode-metrics detailed` vLLM returns, per request, the
accepted and proposed draft counts of every verify step in order
(`per_step_accepted`, `per_step_drafted`). The first output token comes from the
prefill; verify step s then proposes the tokens from response position
p_s = 1 + sum over t < s of (accepted_t + 1), 0-based. Each step's drafted and
accepted tokens count in the bucket holding p_s. Requests answered without the
per-step arrays (a `summary` engine) count in UNKNOWN, so the buckets always add
up to the request totals.
"""

from bisect import bisect_right
from collections.abc import Sequence

# NOTE: the buckets are the wire contract's (the telemetry windows carry them to control).
from specwire.telemetry import POSITION_EDGES, POSITION_LABELS, UNKNOWN

__all__ = [
    "POSITION_EDGES",
    "POSITION_LABELS",
    "UNKNOWN",
    "PositionCounts",
    "by_response_position",
    "position_bucket",
]

# Per bucket: (drafted tokens, accepted tokens).
PositionCounts = tuple[tuple[int, int], ...]


def position_bucket(position: int) -> int:
    """Index of the bucket holding response position `position` (negatives: bucket 0)."""
    return max(bisect_right(POSITION_EDGES, position) - 1, 0)


def by_response_position(accepted: Sequence[int], drafted: Sequence[int]) -> PositionCounts:
    """(drafted, accepted) per position bucket of one request's verify steps."""
    if len(accepted) != len(drafted):
        raise ValueError(
            f"per-step arrays differ in length: {len(accepted)} accepted, {len(drafted)} drafted"
        )
    counts = [[0, 0] for _ in POSITION_EDGES]
    position = 1  # the prefill emitted token 0
    for a, d in zip(accepted, drafted, strict=True):
        if a < 0 or d < 0 or a > d:
            raise ValueError(f"a step accepted {a} of {d} drafted tokens")
        bucket = counts[position_bucket(position)]
        bucket[0] += d
        bucket[1] += a
        position += a + 1
    return tuple((d, a) for d, a in counts)
