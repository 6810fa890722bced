"""Rollouts: a segment bound to a pair version and a baseline, with stages."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from control.models.base import Base, utcnow
from control.models.pairs import PairVersion
from control.models.pools import Pool
from control.models.segments import Segment
from control.models.thresholds import ThresholdSet


class Rollout(Base):
    __tablename__ = "rollouts"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    segment_id: Mapped[int] = mapped_column(
        ForeignKey("segments.id", ondelete="RESTRICT"), index=True
    )
    pair_version_id: Mapped[int] = mapped_column(
        ForeignKey("pair_versions.id", ondelete="RESTRICT"), index=True
    )
    # Indexed: every heartbeat looks up the rollouts its pool serves as the spec arm.
    spec_pool_id: Mapped[int] = mapped_column(
        ForeignKey("pools.id", ondelete="RESTRICT"), index=True
    )
    baseline_pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="RESTRICT"))
    threshold_set_id: Mapped[int] = mapped_column(
        ForeignKey("threshold_sets.id", ondelete="RESTRICT")
    )
    stages: Mapped[list[float]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16), default="draft", index=True)
    # The state a paused rollout resumes into.
    paused_from: Mapped[str | None] = mapped_column(String(16))
    percentage: Mapped[float] = mapped_column(Float, default=0.0)
    cohort_salt: Mapped[str] = mapped_column(String(64))
    # Optimistic concurrency: every flip is a compare-and-set on this counter.
    version: Mapped[int] = mapped_column(default=1)
    # Automation bookkeeping (hysteresis, dwell, probation back-off).
    state_entered_at: Mapped[datetime] = mapped_column(default=utcnow)
    # When the current exposure began (entering an exposing state from one that is
    # not): the sequential monitors read the evidence since then.
    exposed_since: Mapped[datetime | None] = mapped_column(default=None)
    inconclusive_rounds: Mapped[int] = mapped_column(default=0)
    disable_count: Mapped[int] = mapped_column(default=0)
    disabled_reason: Mapped[str | None] = mapped_column(String(100))
    # A specwire.DepthLadder document (validated when set); None: no ladder.
    depth_ladder: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    segment: Mapped[Segment] = relationship()
    pair_version: Mapped[PairVersion] = relationship()
    spec_pool: Mapped[Pool] = relationship(foreign_keys=[spec_pool_id])
    baseline_pool: Mapped[Pool] = relationship(foreign_keys=[baseline_pool_id])
    threshold_set: Mapped[ThresholdSet] = relationship()
