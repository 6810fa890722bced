"""Versioned threshold sets: a change is a new version of the same name."""

from datetime import datetime

from sqlalchemy import Float, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from control.models.base import Base, utcnow


class ThresholdSet(Base):
    __tablename__ = "threshold_sets"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), index=True)
    version: Mapped[int]
    min_acceptance_rate: Mapped[float] = mapped_column(Float)
    min_mean_acceptance_length: Mapped[float] = mapped_column(Float)
    min_speedup: Mapped[float] = mapped_column(Float)
    max_kv_cache_usage: Mapped[float] = mapped_column(Float)
    min_samples: Mapped[int]
    stage_dwell_seconds: Mapped[int]
    guard_dwell_seconds: Mapped[int]
    probation_percentage: Mapped[float] = mapped_column(Float)
    cooldown_seconds: Mapped[int]
    memory_pressure_beats: Mapped[int] = mapped_column(default=3)
    draft_unavailable_seconds: Mapped[int] = mapped_column(default=60)
    max_inconclusive_rounds: Mapped[int] = mapped_column(default=5)
    error_rate_alpha: Mapped[float] = mapped_column(Float, default=0.01)
    sprt_alpha: Mapped[float] = mapped_column(Float, default=0.05)
    sprt_beta: Mapped[float] = mapped_column(Float, default=0.05)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
