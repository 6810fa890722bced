"""Engine agent heartbeats (POST /internal/v1/workers/{worker_id}/heartbeat)."""

from datetime import datetime
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator


class SpecCounters(BaseModel):
    """Cumulative speculative-decoding counters read from the engine's /metrics."""

    num_drafts: int = Field(default=0, ge=0)
    num_draft_tokens: int = Field(default=0, ge=0)
    num_accepted_tokens: int = Field(default=0, ge=0)
    accepted_per_position: list[int] = Field(default_factory=list)


class WorkerHeartbeat(BaseModel):
    pool_id: int
    endpoint_url: str = Field(
        max_length=2000,
        description="http(s)://host[:port][/prefix], ASCII only (IDNs in punycode).",
    )
    healthy: bool
    draft_loaded: bool = False
    kv_cache_usage: float = Field(default=0.0, ge=0.0, le=1.0)
    running: int = Field(default=0, ge=0)
    waiting: int = Field(default=0, ge=0)
    spec: SpecCounters | None = None
    process_memory_bytes: int = Field(default=0, ge=0)
    cpu_seconds: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="User + system CPU seconds the server's process tree used since it "
        "started (a counter; it restarts with the server). None: not measured.",
    )
    generation_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Tokens the engine emitted since it started (vllm:generation_tokens_total).",
    )
    gpu_memory_bytes: int | None = Field(default=None, ge=0)
    engine_version: str | None = None
    model_digest: str | None = Field(
        default=None, description="Weights digest of the target the server loaded."
    )
    sent_at: datetime

    @field_validator("endpoint_url")
    @classmethod
    def _engine_url(cls, value: str) -> str:
        # NOTE: checked where heartbeats arrive: a URL the gateway cannot put in a
        # request head would otherwise fail every request routed to this worker.
        if not value.isascii() or not value.isprintable() or " " in value:
            raise ValueError("must be printable ASCII without spaces (IDNs in punycode)")
        try:
            parts = urlsplit(value)
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"is not a URL: {exc}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be http(s)://host[:port][/prefix]")
        if parts.query or parts.fragment or parts.username or port == 0:
            raise ValueError("must name only scheme, host, port and path")
        return value


class HeartbeatAck(BaseModel):
    worker_id: str
    registered: bool = Field(description="True on the first heartbeat of this worker.")
    snapshot_version: int
