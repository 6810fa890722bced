"""Tenants, their API keys (hashed) and admin tokens (hashed, scoped)."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from control.models.base import Base, utcnow


class Tenant(Base):
    __tablename__ = "tenants"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    allowed_models: Mapped[list[str] | None] = mapped_column(JSON)
    override_allowed: Mapped[bool] = mapped_column(default=False)
    weighted_tokens_per_minute: Mapped[int | None]
    # Share of the tenant's requests that get a per-request record (1.0: all).
    request_sample_rate: Mapped[float] = mapped_column(Float, default=1.0)
    # ETag / If-Match: SQLAlchemy bumps it on every UPDATE and adds WHERE version = …
    version: Mapped[int] = mapped_column(default=1)
    __mapper_args__ = {"version_id_col": version}
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    keys: Mapped[list["ApiKey"]] = relationship(back_populates="tenant", order_by="ApiKey.id")


class ApiKey(Base):
    """Only the sha256 of the key is kept; the key itself is shown once at creation."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100), default="")
    prefix: Mapped[str] = mapped_column(String(16))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None]

    tenant: Mapped[Tenant] = relationship(back_populates="keys")


class AdminToken(Base):
    __tablename__ = "admin_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    scopes: Mapped[list[str]] = mapped_column(JSON)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    revoked_at: Mapped[datetime | None]
