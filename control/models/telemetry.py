"""Telemetry windows flushed by gateways; the unique key makes a repeated flush a no-op."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from control.models.base import Base, utcnow


class TelemetryWindowRow(Base):
    __tablename__ = "telemetry_windows"
    __table_args__ = (
        # NOTE: segment_id, pair_version_id and rollout_key are stored as 0 for "none"
        # so that the unique key holds on every backend (NULLs never collide in SQL).
        # The rollout is part of the key: one segment can carry rollouts for several
        # models, and their baseline windows must not collapse into one row.
        UniqueConstraint(
            "source",
            "window_start",
            "segment_id",
            "arm",
            "pair_version_id",
            "rollout_key",
            name="uq_telemetry_windows_key",
        ),
        Index("ix_telemetry_windows_segment_window", "segment_id", "window_start"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    source: Mapped[str] = mapped_column(String(200))
    window_start: Mapped[datetime]
    window_seconds: Mapped[int]
    segment_id: Mapped[int] = mapped_column(Integer, default=0)
    arm: Mapped[str] = mapped_column(String(16))
    pair_version_id: Mapped[int] = mapped_column(Integer, default=0)
    rollout_id: Mapped[int | None] = mapped_column(ForeignKey("rollouts.id", ondelete="SET NULL"))
    # The rollout id the gateway reported (0: none), kept even when the rollout is
    # unknown here, because it identifies the window.
    rollout_key: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    requests: Mapped[int] = mapped_column(default=0)
    errors: Mapped[int] = mapped_column(default=0)  # arm errors only
    # A 4xx (the request's own fault): never an arm error; 0 for windows stored before.
    client_errors: Mapped[int] = mapped_column(default=0, server_default="0")
    cancellations: Mapped[int] = mapped_column(default=0)
    prompt_tokens: Mapped[int] = mapped_column(default=0)
    completion_tokens: Mapped[int] = mapped_column(default=0)
    drafts: Mapped[int] = mapped_column(default=0)
    drafted_tokens: Mapped[int] = mapped_column(default=0)
    accepted_tokens: Mapped[int] = mapped_column(default=0)
    accepted_per_position: Mapped[list[int]] = mapped_column(JSON, default=list)
    # {"ttft": {"counts": [...], "sum_ms": x, ...}, "tpot": ..., "e2e": ...,
    #  "e2e_per_token": ..., "by_load": [{"load_bucket": i, ...}, ...]}
    histograms: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # {"load": LoadTotals, "request_acceptance": RequestAcceptance}
    moments: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # {"0-15": {"drafted_tokens": d, "accepted_tokens": a}, ...} (specwire.POSITION_BUCKETS);
    # None: stored before gateways sent it.
    by_response_position: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    received_at: Mapped[datetime] = mapped_column(default=utcnow)


class TelemetryBatchRow(Base):
    """One row per (gateway, window start): a replayed batch is recognised whole."""

    __tablename__ = "telemetry_batches"
    __table_args__ = (UniqueConstraint("gateway_id", "window_start"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    gateway_id: Mapped[str] = mapped_column(String(200))
    window_start: Mapped[datetime]
    windows: Mapped[int]
    received_at: Mapped[datetime] = mapped_column(default=utcnow)
