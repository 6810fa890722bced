"""Telemetry batches the gateway flushes to control (POST /internal/v1/telemetry)."""

from datetime import datetime

from pydantic import BaseModel, Field, field_validator

from control.contract.features import Arm

# Fixed log-spaced upper bucket edges in milliseconds: 10 buckets per decade from
# 0.1 ms to 100 s. counts[i] holds samples <= edge[i] (and > edge[i-1]); the last
# count is the overflow bucket. Fixed edges make histograms from any gateway
# and any window addable.
LATENCY_BUCKETS_MS: tuple[float, ...] = tuple(round(10 ** (k / 10), 4) for k in range(-10, 51))


def _empty_counts() -> list[int]:
    return [0] * (len(LATENCY_BUCKETS_MS) + 1)


class LatencyHistogram(BaseModel):
    counts: list[int] = Field(default_factory=_empty_counts)
    sum_ms: float = 0.0

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


class TelemetryBatch(BaseModel):
    gateway_id: str = Field(min_length=1, max_length=200)
    window_start: datetime
    windows: list[TelemetryWindow]


class TelemetryAck(BaseModel):
    stored: int
    duplicates: int
