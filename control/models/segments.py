"""Traffic segments: selectors over normalized request features."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, String
from sqlalchemy.orm import Mapped, mapped_column

from control.models.base import Base, utcnow


class Segment(Base):
    __tablename__ = "segments"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    description: Mapped[str] = mapped_column(String(500), default="")
    # A control.contract.SegmentSelector as JSON; validated by the service.
    selector: Mapped[dict[str, Any]] = mapped_column(JSON)
    priority: Mapped[int] = mapped_column(default=0)
    # The governed eval set (by name; its latest version) a pair version's offline
    # evaluation must use before a rollout on this segment may start.
    eval_set: Mapped[str | None] = mapped_column(String(100), default=None)
    version: Mapped[int] = mapped_column(default=1)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
