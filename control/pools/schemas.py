"""Request and response bodies of the pools API."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from control.ids import DbId


class PoolCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    served_model_name: str = Field(min_length=1, max_length=200)
    target_ref: str = Field(min_length=1, max_length=1000)
    pair_version_id: DbId | None = Field(default=None, description="None: a baseline pool.")
    engine_args: dict[str, Any] = Field(default_factory=dict)
    desired_workers: int = Field(default=1, ge=0, le=1000)


class PoolUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    engine_args: dict[str, Any] | None = None
    desired_workers: int | None = Field(default=None, ge=0, le=1000)


class WorkerSummary(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    endpoint_url: str
    healthy: bool
    draft_loaded: bool
    kv_cache_usage: float
    running: int
    waiting: int
    last_heartbeat_at: datetime


class Pool(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    name: str
    served_model_name: str
    target_ref: str
    pair_version_id: int | None
    engine_args: dict[str, Any]
    desired_workers: int
    version: int = Field(description="Bumped by every change; the ETag.")
    created_at: datetime
    updated_at: datetime
    workers: list[WorkerSummary]
