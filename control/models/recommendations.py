"""Depth advice: the speculative length with the best expected speedup."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from control.models.base import Base, utcnow


class DepthRecommendation(Base):
    __tablename__ = "depth_recommendations"

    id: Mapped[int] = mapped_column(primary_key=True)
    rollout_id: Mapped[int] = mapped_column(
        ForeignKey("rollouts.id", ondelete="CASCADE"), index=True
    )
    pair_version_id: Mapped[int] = mapped_column(ForeignKey("pair_versions.id"))
    current_k: Mapped[int]
    recommended_k: Mapped[int]
    expected_speedup_current: Mapped[float]
    expected_speedup_recommended: Mapped[float]
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    task_id: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
