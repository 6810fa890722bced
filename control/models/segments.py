"""Traffic segments: selectors over normalized request features."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, String
from sqlalchemy.orm import Mapped, mapped_column

from control.models.base import Base, utcnow
from specwire import DEFAULT_TPOT_SLO_S, DEFAULT_TTFT_SLO_S


class Segment(Base):
    __tablename__ = "segments"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    description: Mapped[str] = mapped_column(String(500), default="")
    # A specwire.SegmentSelector as JSON; validated by the service.
    selector: Mapped[dict[str, Any]] = mapped_column(JSON)
    priority: Mapped[int] = mapped_column(default=0)
    # The governed eval set (by name; its latest version) a pair version's offline
    # evaluation must use before a rollout on this segment may start.
    eval_set: Mapped[str | None] = mapped_column(String(100), default=None)
    # Latency SLO: 95 % of the segment's requests within these (seconds, each an edge
    # of the gateway's latency buckets); exported for the burn-rate alerts.
    ttft_slo_p95_s: Mapped[float] = mapped_column(
        Float, default=DEFAULT_TTFT_SLO_S, server_default=str(DEFAULT_TTFT_SLO_S)
    )
    tpot_slo_p95_s: Mapped[float] = mapped_column(
        Float, default=DEFAULT_TPOT_SLO_S, server_default=str(DEFAULT_TPOT_SLO_S)
    )
    version: Mapped[int] = mapped_column(default=1)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
