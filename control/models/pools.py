"""Engine pools and the workers that serve them."""

from datetime import datetime
from typing import Any
from uuid import uuid4

from sqlalchemy import JSON, BigInteger, Float, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from control.models.base import Base, utcnow
from control.models.pairs import PairVersion


class Pool(Base):
    """A target model plus an optional pair version; no pair version = a baseline pool."""

    __tablename__ = "pools"

    id: Mapped[int] = mapped_column(primary_key=True)
    # NOTE: the pool's identity for credentials. SQLite reuses the highest id after a
    # delete, so an agent enrolment names this too: a new pool with an old id is not
    # the old pool.
    uid: Mapped[str] = mapped_column(String(32), unique=True, default=lambda: uuid4().hex)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    served_model_name: Mapped[str] = mapped_column(String(200), index=True)
    target_ref: Mapped[str] = mapped_column(String(1000))
    pair_version_id: Mapped[int | None] = mapped_column(
        ForeignKey("pair_versions.id", ondelete="RESTRICT"), index=True
    )
    engine_args: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    desired_workers: Mapped[int] = mapped_column(default=1)
    # ETag / If-Match: SQLAlchemy bumps it on every UPDATE and adds WHERE version = …
    version: Mapped[int] = mapped_column(default=1)
    __mapper_args__ = {"version_id_col": version}
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    pair_version: Mapped[PairVersion | None] = relationship()
    workers: Mapped[list["Worker"]] = relationship(back_populates="pool", order_by="Worker.id")


class Worker(Base):
    """One vLLM server of a pool, registered by its agent's first heartbeat."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    pool_id: Mapped[int] = mapped_column(ForeignKey("pools.id", ondelete="CASCADE"), index=True)
    endpoint_url: Mapped[str] = mapped_column(String(500))
    healthy: Mapped[bool] = mapped_column(default=False)
    draft_loaded: Mapped[bool] = mapped_column(default=False)
    kv_cache_usage: Mapped[float] = mapped_column(Float, default=0.0)
    running: Mapped[int] = mapped_column(default=0)
    waiting: Mapped[int] = mapped_column(default=0)
    spec_counters: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # NOTE: 64-bit: a vLLM server's resident memory is well above 2 GiB.
    process_memory_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    gpu_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    # Counters from the last heartbeat (they restart with the server): the server's
    # process-tree CPU seconds and the tokens its engine emitted.
    cpu_seconds: Mapped[float | None] = mapped_column(Float)
    generation_tokens: Mapped[int | None] = mapped_column(BigInteger)
    # specwire.EngineTelemetry of the last heartbeat (steps, KV blocks, energy).
    engine_telemetry: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    engine_version: Mapped[str | None] = mapped_column(String(50))
    # The engine's version and the specroute build around it, as the agent reported it.
    engine_build: Mapped[str | None] = mapped_column(String(200))
    # Weights digest of the target the server loaded, as its agent reported it.
    model_digest: Mapped[str | None] = mapped_column(String(64))
    # Consecutive heartbeats with KV-cache usage above the pool's threshold (memory guard).
    high_memory_beats: Mapped[int] = mapped_column(default=0)
    first_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_heartbeat_at: Mapped[datetime] = mapped_column(default=utcnow)

    pool: Mapped[Pool] = relationship(back_populates="workers")
