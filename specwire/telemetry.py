"""Telemetry batches the gateway flushes to control (POST /internal/v1/telemetry).

A window holds plain counts and fixed-bucket histograms, so windows from any
gateway replica and any time slice add exactly. `WindowCounts` is the one
definition of that counter set and `add_counts` its addition: the gateway's
accumulator, control's totals, the stored row's columns and the ingestion's
bounds are all derived from them, so a new counter is one field here (plus the
column and its migration when it is a plain count).
Besides the arm-wide histograms, a window keeps its latency histograms per
*load bucket*: the number of other requests the chosen worker was already
serving (from this gateway) when the request was dispatched. Speculation can
win on an idle worker and lose on a busy one, so the automation compares the
arms only within the same load bucket.
It also keeps the drafted and accepted tokens per *response-position bucket*:
where in the response (0-based token index) each verify step began, so
acceptance early and late in long answers can be told apart.
Accepted tokens are a subset of the drafted ones: `accepted_tokens` never exceeds
`drafted_tokens`, in the window's totals nor in any position bucket.
"""

import math
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, Field, field_validator

# NOTE: STORED is re-exported: control reads stored windows with it.
from specwire.draft_bounds import STORED as STORED
from specwire.draft_bounds import at_most_drafted
from specwire.features import Arm
from specwire.requests import RequestRecordDoc

# Fixed log-spaced upper bucket edges in milliseconds: 10 buckets per decade from
# 0.1 ms to 100 s. counts[i] holds samples <= edge[i] (and > edge[i-1]); the last
# count is the overflow bucket. Fixed edges make histograms from any gateway
# and any window addable.
LATENCY_BUCKETS_MS: tuple[float, ...] = tuple(round(10 ** (k / 10), 4) for k in range(-10, 51))

# Lower edges of the load buckets (requests already in flight on the worker at
# dispatch): bucket i holds loads in [edge[i], edge[i + 1]); the last is open.
# Exact at low load, about 1.5x wide above, where one request more matters less.
LOAD_BUCKET_EDGES: tuple[int, ...] = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)

# Lower edges of the response-position buckets (0-based token index in the response
# where a verify step began); POSITION_LABELS names them. UNKNOWN holds the tokens
# whose position is not known: requests answered without per-step arrays.
POSITION_EDGES: tuple[int, ...] = (0, 16, 64, 256)
POSITION_LABELS: tuple[str, ...] = ("0-15", "16-63", "64-255", "256+")
UNKNOWN = "unknown"
POSITION_BUCKETS: tuple[str, ...] = (*POSITION_LABELS, UNKNOWN)

# NOTE: a latency of 0 ms (a clock step) has no logarithm; it counts as 1 us.
_MIN_LOG_MS = 1e-3


def load_bucket(load: int) -> int:
    """Index of the load bucket holding `load` (negative loads count as 0)."""
    return max(bisect_right(LOAD_BUCKET_EDGES, load) - 1, 0)


def log_ms(value_ms: float) -> float:
    """The natural log the histograms' log moments are kept in."""
    return math.log(max(value_ms, _MIN_LOG_MS))


def _empty_counts() -> list[int]:
    return [0] * (len(LATENCY_BUCKETS_MS) + 1)


class LatencyHistogram(BaseModel):
    counts: list[int] = Field(default_factory=_empty_counts)
    sum_ms: float = 0.0
    sum_log: float | None = Field(
        default=None, description="Sum of ln(ms) over the samples; None: not recorded."
    )
    sum_sq_log: float | None = Field(
        default=None, description="Sum of ln(ms)^2 over the samples; None: not recorded."
    )

    @field_validator("counts")
    @classmethod
    def _right_length(cls, v: list[int]) -> list[int]:
        if len(v) != len(LATENCY_BUCKETS_MS) + 1:
            raise ValueError(f"counts must have {len(LATENCY_BUCKETS_MS) + 1} buckets")
        if any(c < 0 for c in v):
            raise ValueError("counts must be non-negative")
        return v

    @property
    def total(self) -> int:
        return sum(self.counts)


class LoadSlice(BaseModel):
    """The latencies of the requests dispatched at one load bucket."""

    load_bucket: int = Field(ge=0, lt=len(LOAD_BUCKET_EDGES))
    requests: int = Field(default=0, ge=0)
    load_sum: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Sum over the slice's requests of the load at dispatch (None: not recorded; "
            "the automation then takes the bucket's midpoint). The buckets above 4 are "
            "ranges, and the load models need each slice's exact mean load."
        ),
    )
    ttft: LatencyHistogram = Field(default_factory=LatencyHistogram)
    tpot: LatencyHistogram = Field(default_factory=LatencyHistogram)
    e2e_per_token: LatencyHistogram = Field(default_factory=LatencyHistogram)


class LoadTotals(BaseModel):
    """Load the arm's requests met at dispatch (means = sum / dispatched)."""

    dispatched: int = Field(default=0, ge=0, description="Requests sent to a worker.")
    gateway_load_sum: int = Field(
        default=0, ge=0, description="Sum of this gateway's other in-flight requests."
    )
    engine_running_sum: int = Field(
        default=0, ge=0, description="Sum of the engine's running count at its last heartbeat."
    )
    engine_waiting_sum: int = Field(
        default=0, ge=0, description="Sum of the engine's waiting count at its last heartbeat."
    )


class RequestAcceptance(BaseModel):
    """Per-request acceptance moments, so the request (not the drafted position) can be
    the unit of the acceptance statistics. For request r: a_r accepted draft tokens out
    of t_r judged draft positions (drafts + accepted - drafts accepted at the last
    position: positions after a rejection are never judged)."""

    requests: int = Field(default=0, ge=0, description="Requests with judged positions.")
    judged: int = Field(default=0, ge=0, description="Sum of t_r.")
    accepted: int = Field(default=0, ge=0, description="Sum of a_r.")
    accepted_sq: int = Field(default=0, ge=0, description="Sum of a_r^2.")
    accepted_judged: int = Field(default=0, ge=0, description="Sum of a_r t_r.")
    judged_sq: int = Field(default=0, ge=0, description="Sum of t_r^2.")


class PositionTokens(BaseModel):
    """Draft tokens of one response-position bucket."""

    drafted_tokens: int = Field(default=0, ge=0, description="Draft tokens proposed.")
    accepted_tokens: int = Field(
        default=0, ge=0, description="Of those, the draft tokens the target accepted."
    )

    _accepted_at_most_drafted = field_validator("accepted_tokens")(at_most_drafted)


class WindowCounts(BaseModel):
    """Every counter of a telemetry window: what one arm's requests added up to.

    Each field is a count, a fixed-bucket histogram or a set of moments, so that two
    windows add field by field (`add_counts`), whichever gateway or time slice they
    come from. (Means, rates and quantiles do not add; that is why the statistics
    always start from these sums, never from per-window ratios.)
    """

    requests: int = Field(default=0, ge=0, description="Routed requests, whatever the outcome.")
    errors: int = Field(
        default=0,
        ge=0,
        description="Arm errors: engine faults and 5xx, timeouts, broken streams, no worker.",
    )
    client_errors: int = Field(
        default=0,
        ge=0,
        description="Requests refused for their own fault (a 4xx: an engine's refusal of an "
        "invalid request, the tenant's quota); never an arm error, and without latencies.",
    )
    cancellations: int = Field(default=0, ge=0)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    drafts: int = Field(default=0, ge=0, description="Draft proposals (target passes).")
    drafted_tokens: int = Field(default=0, ge=0)
    accepted_tokens: int = Field(
        default=0, ge=0, description="Of drafted_tokens, those the target accepted."
    )
    accepted_per_position: list[int] = Field(
        default_factory=list, description="Accepted tokens at draft position i (0-based)."
    )
    ttft: LatencyHistogram = Field(default_factory=LatencyHistogram)
    tpot: LatencyHistogram = Field(default_factory=LatencyHistogram)
    e2e: LatencyHistogram = Field(default_factory=LatencyHistogram)
    e2e_per_token: LatencyHistogram = Field(
        default_factory=LatencyHistogram,
        description="End-to-end time / completion tokens, per request with tokens.",
    )
    by_load: list[LoadSlice] = Field(
        default_factory=list, description="Latencies per load bucket at dispatch."
    )
    load: LoadTotals = Field(default_factory=LoadTotals)
    request_acceptance: RequestAcceptance = Field(default_factory=RequestAcceptance)
    by_response_position: dict[str, PositionTokens] = Field(
        default_factory=dict,
        description="Drafted and accepted tokens per response-position bucket (keys: "
        f"{', '.join(POSITION_BUCKETS)}); a bucket without tokens may be left out. From a "
        "gateway that fills it, the buckets add up to drafted_tokens and accepted_tokens; "
        "empty from older gateways.",
    )

    _accepted_at_most_drafted = field_validator("accepted_tokens")(at_most_drafted)

    @field_validator("by_response_position")
    @classmethod
    def _known_buckets(cls, v: dict[str, PositionTokens]) -> dict[str, PositionTokens]:
        unknown = sorted(set(v) - set(POSITION_BUCKETS))
        if unknown:
            raise ValueError(f"unknown response-position buckets {unknown}")
        return v


MAX_MISMATCH_IDS = 20


class OutputContractCounts(BaseModel):
    """Paired checks of the output contract in one window: the same request run on
    both arms (no text kept, ids only). Greedy (T=0) pairs compare their completion
    tokens; sampled (T > 0) pairs which arm's completion the target found likelier
    (gateway.proxy.pair_check). Carried on the spec arm's window of the rollout."""

    pairs: int = Field(default=0, ge=0, description="Pairs whose two answers were compared.")
    equal: int = Field(default=0, ge=0, description="Pairs whose completion tokens were equal.")
    divergence_sum: int = Field(
        default=0,
        ge=0,
        description="Sum over unequal pairs of the first position where they differ (tokens, "
        "or characters when an engine returned no token ids).",
    )
    incomplete: int = Field(
        default=0, ge=0, description="Checks where an arm failed or timed out: no pair."
    )
    mismatched_ids: list[str] = Field(
        default_factory=list,
        max_length=MAX_MISMATCH_IDS,
        description="Request ids of unequal pairs (the first MAX_MISMATCH_IDS of the window).",
    )
    sampled_spec_higher: int = Field(
        default=0,
        ge=0,
        description="Sampled pairs whose spec-arm completion had the higher mean target "
        "log-probability (tokens after the first).",
    )
    sampled_spec_lower: int = Field(
        default=0, ge=0, description="Sampled pairs whose spec-arm completion had the lower."
    )
    sampled_ties: int = Field(
        default=0, ge=0, description="Sampled pairs with equal means, or a one-token answer."
    )
    sampled_higher_ids: list[str] = Field(
        default_factory=list,
        max_length=MAX_MISMATCH_IDS,
        description="Request ids of spec-higher sampled pairs (the window's first ones).",
    )
    sampled_lower_ids: list[str] = Field(
        default_factory=list,
        max_length=MAX_MISMATCH_IDS,
        description="Request ids of spec-lower sampled pairs (the window's first ones).",
    )

    @property
    def checks(self) -> int:
        """Paired checks these counts account for: greedy and sampled, incomplete too."""
        return (
            self.pairs
            + self.incomplete
            + self.sampled_spec_higher
            + self.sampled_spec_lower
            + self.sampled_ties
        )


class TelemetryWindow(WindowCounts):
    """One (segment, arm, pair version, rollout) window of one gateway."""

    output_contract: OutputContractCounts = Field(default_factory=OutputContractCounts)

    segment_id: int | None = Field(description="None: no segment matched.")
    arm: Arm
    pair_version_id: int | None = None
    rollout_id: int | None = None
    window_start: datetime
    window_seconds: int = Field(gt=0)


def _fields(model: type[BaseModel], annotation: Any) -> tuple[str, ...]:
    return tuple(n for n, f in model.model_fields.items() if f.annotation == annotation)


# The counter set by kind, read off the models above (never listed by hand).
COUNTER_FIELDS: tuple[str, ...] = _fields(WindowCounts, int)  # plain counts
HISTOGRAM_FIELDS: tuple[str, ...] = _fields(WindowCounts, LatencyHistogram)  # arm-wide
SLICE_HISTOGRAM_FIELDS: tuple[str, ...] = _fields(LoadSlice, LatencyHistogram)  # per load bucket
MOMENT_FIELDS: tuple[str, ...] = _fields(WindowCounts, LoadTotals) + _fields(
    WindowCounts, RequestAcceptance
)


def add_positions(rows: Iterable[Sequence[int]]) -> list[int]:
    """Position-wise sum, padding shorter rows with zeros: `accepted_per_position` may
    differ in length across windows (pair versions with another speculative length, or
    no deep position reached), and a missing position counts as zero."""
    total: list[int] = []
    for row in rows:
        if len(row) > len(total):
            total.extend([0] * (len(row) - len(total)))
        for i, c in enumerate(row):
            total[i] += c
    return total


def add_response_positions(
    parts: Iterable[dict[str, PositionTokens]],
) -> dict[str, PositionTokens]:
    """Bucket-wise sum, in POSITION_BUCKETS order; a bucket no part has stays out."""
    drafted: dict[str, int] = {}
    accepted: dict[str, int] = {}
    for part in parts:
        for bucket, tokens in part.items():
            drafted[bucket] = drafted.get(bucket, 0) + tokens.drafted_tokens
            accepted[bucket] = accepted.get(bucket, 0) + tokens.accepted_tokens
    return {
        b: PositionTokens.model_construct(drafted_tokens=drafted[b], accepted_tokens=accepted[b])
        for b in POSITION_BUCKETS
        if b in drafted
    }


def add_histograms(histograms: Iterable[LatencyHistogram]) -> LatencyHistogram:
    """Bucket-wise sum; exact because all histograms share `LATENCY_BUCKETS_MS`. The log
    moments add when every part has them (None otherwise: not recorded)."""
    parts = list(histograms)
    logs = [h.sum_log for h in parts]
    squares = [h.sum_sq_log for h in parts]
    return LatencyHistogram.model_construct(
        counts=add_positions(h.counts for h in parts) or _empty_counts(),
        sum_ms=sum((h.sum_ms for h in parts), 0.0),
        sum_log=_sum_recorded(logs) if parts else None,
        sum_sq_log=_sum_recorded(squares) if parts else None,
    )


Recorded = TypeVar("Recorded", int, float)


def _sum_recorded(values: list[Recorded | None]) -> Recorded | None:
    """The sum, or None when any part did not record the value."""
    if any(v is None for v in values):
        return None
    return sum(v for v in values if v is not None)


Moments = TypeVar("Moments", LoadTotals, RequestAcceptance)


def _add_moments(kind: type[Moments]) -> Callable[[list[Moments]], Moments]:
    def add(parts: list[Moments]) -> Moments:
        return kind.model_construct(
            **{n: sum(getattr(p, n) for p in parts) for n in kind.model_fields}
        )

    return add


def add_load_slices(windows: Iterable[Sequence[LoadSlice]]) -> list[LoadSlice]:
    """The windows' slices of the same load bucket add; the result is ordered by bucket."""
    by_bucket: dict[int, list[LoadSlice]] = {}
    for slices in windows:
        for s in slices:
            by_bucket.setdefault(s.load_bucket, []).append(s)
    added: list[LoadSlice] = []
    for bucket, parts in sorted(by_bucket.items()):
        values: dict[str, Any] = {
            name: add_histograms(getattr(s, name) for s in parts) for name in SLICE_HISTOGRAM_FIELDS
        }
        values |= {
            "load_bucket": bucket,
            "requests": sum(s.requests for s in parts),
            "load_sum": _sum_recorded([s.load_sum for s in parts]),
        }
        added.append(LoadSlice.model_construct(**values))
    return added


def _adder(name: str, annotation: Any) -> Callable[[list[Any]], Any]:
    if annotation is int:
        return sum
    if annotation == list[int]:
        return add_positions
    if annotation is LatencyHistogram:
        return add_histograms
    if annotation == list[LoadSlice]:
        return add_load_slices
    if annotation is LoadTotals or annotation is RequestAcceptance:
        return _add_moments(annotation)
    if annotation == dict[str, PositionTokens]:
        return add_response_positions
    # NOTE: failing at import makes a counter without an addition impossible to ship.
    raise TypeError(f"WindowCounts.{name}: no addition defined for {annotation}")


_ADDERS: dict[str, Callable[[list[Any]], Any]] = {
    name: _adder(name, field.annotation) for name, field in WindowCounts.model_fields.items()
}


def add_counts(windows: Iterable[WindowCounts]) -> dict[str, Any]:
    """Every counter of `windows` added: the fields of a `WindowCounts` (or of any model
    built on it) holding their sum."""
    items = list(windows)
    return {name: add([getattr(w, name) for w in items]) for name, add in _ADDERS.items()}


class TelemetryBatch(BaseModel):
    gateway_id: str = Field(min_length=1, max_length=200)
    window_start: datetime
    windows: list[TelemetryWindow]
    requests: list[RequestRecordDoc] = Field(
        default_factory=list, description="Sampled per-request records finished in the window."
    )
    requests_dropped: int = Field(
        default=0, ge=0, description="Sampled records over the per-window cap, not sent."
    )


class TelemetryAck(BaseModel):
    stored: int
    duplicates: int
    requests_stored: int = Field(default=0, description="Per-request records stored.")
