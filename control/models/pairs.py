"""Draft–target pairs and their immutable versions."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from control.models.base import Base, utcnow


class Pair(Base):
    __tablename__ = "pairs"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    description: Mapped[str] = mapped_column(String(500), default="")
    # ETag / If-Match: SQLAlchemy bumps it on every UPDATE and adds WHERE version = …
    version: Mapped[int] = mapped_column(default=1)
    __mapper_args__ = {"version_id_col": version}
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    versions: Mapped[list["PairVersion"]] = relationship(
        back_populates="pair", order_by="PairVersion.version"
    )


class PairVersion(Base):
    """Immutable: a change is a new version. Only `status` moves (active → retired)."""

    __tablename__ = "pair_versions"
    __table_args__ = (UniqueConstraint("pair_id", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    pair_id: Mapped[int] = mapped_column(ForeignKey("pairs.id", ondelete="RESTRICT"), index=True)
    version: Mapped[int]
    method: Mapped[str] = mapped_column(String(32))
    target_ref: Mapped[str] = mapped_column(String(1000))
    target_digest: Mapped[str] = mapped_column(String(64))
    draft_ref: Mapped[str | None] = mapped_column(String(1000))
    draft_digest: Mapped[str | None] = mapped_column(String(64))
    num_speculative_tokens: Mapped[int]
    draft_sample_method: Mapped[str] = mapped_column(String(32), default="greedy")
    tokenizer_hash: Mapped[str] = mapped_column(String(64))
    chat_template_hash: Mapped[str | None] = mapped_column(String(64))
    adapter_id: Mapped[str | None] = mapped_column(String(200))
    # Local path of the LoRA adapter (the launcher loads it as `adapter_id`).
    adapter_ref: Mapped[str | None] = mapped_column(String(1000))
    engine_version: Mapped[str] = mapped_column(String(50))
    capabilities: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(16), default="active")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    retired_at: Mapped[datetime | None]

    pair: Mapped[Pair] = relationship(back_populates="versions")

    @property
    def label(self) -> str:
        return f"{self.pair.name}-v{self.version}"
