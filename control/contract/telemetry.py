"""Telemetry batches the gateway flushes to control (POST /internal/v1/telemetry).

A window holds plain counts and fixed-bucket histograms, so windows from any
gateway replica and any time slice add exactly (see `control.stats.windows`).
Besides the arm-wide histograms, a window keeps its latency histograms per
*load bucket*: the number of other requests the chosen worker was already
serving (from this gateway) when the request was dispatched. Speculation can
win on an idle worker and lose on a busy one, so the automation compares the
arms only within the same load bucket.
"""

import math
from bisect import bisect_right
from datetime import datetime

from pydantic import BaseModel, Field, field_validator

from control.contract.features import Arm
from control.contract.requests import RequestRecordDoc

# Fixed log-spaced upper bucket edges in milliseconds: 10 buckets per decade from
# 0.1 ms to 100 s. counts[i] holds samples <= edge[i] (and > edge[i-1]); the last
# count is the overflow bucket. Fixed edges make histograms from any gateway
# and any window addable.
LATENCY_BUCKETS_MS: tuple[float, ...] = tuple(round(10 ** (k / 10), 4) for k in range(-10, 51))

# Lower edges of the load buckets (requests already in flight on the worker at
# dispatch): bucket i holds loads in [edge[i], edge[i + 1]); the last is open.
# Exact at low load, about 1.5x wide above, where one request more matters less.
LOAD_BUCKET_EDGES: tuple[int, ...] = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)

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


class TelemetryWindow(BaseModel):
    segment_id: int | None = Field(description="None: no segment matched.")
    arm: Arm
    pair_version_id: int | None = None
    rollout_id: int | None = None
    window_start: datetime
    window_seconds: int = Field(gt=0)
    requests: int = Field(default=0, ge=0)
    errors: int = Field(default=0, ge=0)
    cancellations: int = Field(default=0, ge=0)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    drafts: int = Field(default=0, ge=0, description="Draft proposals (target passes).")
    drafted_tokens: int = Field(default=0, ge=0)
    accepted_tokens: int = Field(default=0, ge=0)
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
