"""Request and response bodies of the tenants, keys and admin-tokens API."""

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from control.api.auth import Scope

Name = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class TenantCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Name
    allowed_models: list[str] | None = Field(default=None, description="None: every model.")
    override_allowed: bool = False
    weighted_tokens_per_minute: int | None = Field(default=None, ge=1, le=2_000_000_000)


class TenantUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allowed_models: list[str] | None = None
    override_allowed: bool | None = None
    weighted_tokens_per_minute: int | None = Field(default=None, ge=1, le=2_000_000_000)
    clear_quota: bool = Field(default=False, description="Remove the token quota.")


class Tenant(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    allowed_models: list[str] | None
    override_allowed: bool
    weighted_tokens_per_minute: int | None
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
    created_at: datetime
    revoked_at: datetime | None


class AdminTokenCreated(AdminToken):
    token: str = Field(description="The token itself. Shown once; only its sha256 is stored.")
