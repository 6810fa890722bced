"""Per-request records (no text), kept for the retention period (see control.requests)."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from control.models.base import Base, utcnow


class RequestRecordRow(Base):
    """One gateway request. No foreign keys: a record outlives the rollout, segment or
    tenant it names (support reads what the gateway decided at the time), and the
    retention job is its only deleter."""

    __tablename__ = "request_records"
    __table_args__ = (
        Index("ix_request_records_request_id", "request_id"),
        Index("ix_request_records_received_at", "received_at"),
        Index("ix_request_records_tenant_received", "tenant_id", "received_at"),
        Index("ix_request_records_segment_received", "segment_id", "received_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    request_id: Mapped[str] = mapped_column(String(128))
    gateway_id: Mapped[str] = mapped_column(String(200))
    received_at: Mapped[datetime]
    # None: refused before the key was recognised (see specwire.requests).
    tenant_id: Mapped[int | None]
    tenant: Mapped[str | None] = mapped_column(String(100))
    endpoint: Mapped[str] = mapped_column(String(16))
    stream: Mapped[bool]
    model: Mapped[str | None] = mapped_column(String(256))
    adapter: Mapped[str | None] = mapped_column(String(256))
    segment_id: Mapped[int | None]
    segment: Mapped[str | None] = mapped_column(String(200))
    rollout_id: Mapped[int | None]
    rollout_version: Mapped[int | None]
    pair_version_id: Mapped[int | None]
    pair: Mapped[str | None] = mapped_column(String(200))
    arm: Mapped[str | None] = mapped_column(String(16))  # None: refused before routing
    reason: Mapped[str] = mapped_column(String(64))
    pool_id: Mapped[int | None]
    worker_id: Mapped[str | None] = mapped_column(String(200))
    engine_version: Mapped[str | None] = mapped_column(String(50))
    engine_build: Mapped[str | None] = mapped_column(String(200))
    # SamplingSummary: numbers, flags, counts and digests only.
    sampling: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    prompt_tokens: Mapped[int] = mapped_column(default=0)
    completion_tokens: Mapped[int] = mapped_column(default=0)
    drafts: Mapped[int] = mapped_column(default=0)
    drafted_tokens: Mapped[int] = mapped_column(default=0)
    accepted_tokens: Mapped[int] = mapped_column(default=0)
    accepted_per_position: Mapped[list[int]] = mapped_column(JSON, default=list)
    ttft_ms: Mapped[float | None] = mapped_column(Float)
    tpot_ms: Mapped[float | None] = mapped_column(Float)
    e2e_ms: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(String(16))
    http_status: Mapped[int]
    error_code: Mapped[str | None] = mapped_column(String(64))
    stored_at: Mapped[datetime] = mapped_column(default=utcnow)
