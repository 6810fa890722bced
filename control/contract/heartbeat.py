"""Engine agent heartbeats (POST /internal/v1/workers/{worker_id}/heartbeat)."""

from datetime import datetime

from pydantic import BaseModel, Field


class SpecCounters(BaseModel):
    """Cumulative speculative-decoding counters read from the engine's /metrics."""

    num_drafts: int = Field(default=0, ge=0)
    num_draft_tokens: int = Field(default=0, ge=0)
    num_accepted_tokens: int = Field(default=0, ge=0)
    accepted_per_position: list[int] = Field(default_factory=list)


class WorkerHeartbeat(BaseModel):
    pool_id: int
    endpoint_url: str
    healthy: bool
    draft_loaded: bool = False
    kv_cache_usage: float = Field(default=0.0, ge=0.0, le=1.0)
    running: int = Field(default=0, ge=0)
    waiting: int = Field(default=0, ge=0)
    spec: SpecCounters | None = None
    process_memory_bytes: int = Field(default=0, ge=0)
    gpu_memory_bytes: int | None = Field(default=None, ge=0)
    engine_version: str | None = None
    sent_at: datetime


class HeartbeatAck(BaseModel):
    worker_id: str
    registered: bool = Field(description="True on the first heartbeat of this worker.")
    snapshot_version: int
