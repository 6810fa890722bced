"""Request and response bodies of the tenants, keys and admin-tokens API."""

from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from control.credentials import Scope
from control.internal.origins import network_of

SAMPLE_RATE_DESCRIPTION = (
    "Share of the tenant's requests that get a per-request record (no text), 0 to 1."
)

Name = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class TenantCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Name
    allowed_models: list[str] | None = Field(default=None, description="None: every model.")
    override_allowed: bool = False
    weighted_tokens_per_minute: int | None = Field(default=None, ge=1, le=2_000_000_000)
    request_sample_rate: float = Field(
        default=1.0, ge=0.0, le=1.0, description=SAMPLE_RATE_DESCRIPTION
    )


class TenantUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allowed_models: list[str] | None = None
    override_allowed: bool | None = None
    weighted_tokens_per_minute: int | None = Field(default=None, ge=1, le=2_000_000_000)
    request_sample_rate: float | None = Field(
        default=None, ge=0.0, le=1.0, description=SAMPLE_RATE_DESCRIPTION
    )
    clear_quota: bool = Field(default=False, description="Remove the token quota.")


class Tenant(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    allowed_models: list[str] | None
    override_allowed: bool
    weighted_tokens_per_minute: int | None
    request_sample_rate: float
    version: int = Field(description="Bumped by every change; the ETag.")
    created_at: datetime
    updated_at: datetime


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="", max_length=100)


class ApiKey(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    tenant_id: int
    name: str
    prefix: str = Field(description="The key's first characters, to recognise it.")
    created_at: datetime
    revoked_at: datetime | None


class ApiKeyCreated(ApiKey):
    key: str = Field(description="The key itself. Shown once; only its sha256 is stored.")


class AdminTokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Name
    scopes: list[Scope] = Field(min_length=1)


class AdminToken(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    prefix: str
    scopes: list[str]
    extra: dict[str, Any] = Field(
        default_factory=dict,
        description="An agent token's enrolment: pool_id and allowed_endpoints.",
    )
    created_at: datetime
    revoked_at: datetime | None


class AgentTokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Name
    allowed_endpoints: list[str] = Field(
        min_length=1,
        max_length=32,
        description=(
            "Origins the agent's workers may serve on: `scheme://host:port`, "
            "`scheme://host` for any port of that host, or `scheme://ADDRESS/PREFIX` for "
            "any host of an IP network (a Kubernetes pod CIDR), any port."
        ),
    )

    @field_validator("allowed_endpoints")
    @classmethod
    def _origins(cls, values: list[str]) -> list[str]:
        for value in values:
            if len(value) > 300 or not value.isascii():
                raise ValueError("an allowed endpoint is an ASCII origin of at most 300 chars")
            try:
                parts = urlsplit(value)
                parts.port  # noqa: B018 (raises on a bad port)
            except ValueError as exc:
                raise ValueError(f"{value!r} is not an origin: {exc}") from None
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{value!r} is not http(s)://host[:port]")
            if parts.query or parts.fragment or parts.username:
                raise ValueError(f"{value!r} must be an origin only (no path or query)")
            try:
                network_of(value)
            except ValueError as exc:
                raise ValueError(
                    f"{value!r} must be an origin only, or scheme://ADDRESS/PREFIX for an IP "
                    f"network: {exc}"
                ) from None
        return values


class AdminTokenCreated(AdminToken):
    token: str = Field(description="The token itself. Shown once; only its sha256 is stored.")
