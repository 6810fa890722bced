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


class EngineTelemetry(BaseModel):
    """Per-step and memory figures read from the engine's own /metrics, and the host's
    energy counter. vLLM 0.32 exports no draft or verification timing: the decode time
    below covers both (docs/metrics.md derives the time per sequence step from it)."""

    engine_steps: int | None = Field(
        default=None,
        ge=0,
        description="Engine steps (batched target forward passes) since the server started: "
        "the sample count of vllm:iteration_tokens_total. None: not exported.",
    )
    decode_seconds: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Sum over finished requests of first-to-last token time "
        "(vllm:request_decode_time_seconds_sum): draft and verification together.",
    )
    decode_requests: int | None = Field(
        default=None,
        ge=0,
        description="Finished requests behind decode_seconds (its _count).",
    )
    kv_blocks_total: int | None = Field(
        default=None, ge=0, description="KV-cache blocks of the engines (num_gpu_blocks)."
    )
    kv_blocks_used: int | None = Field(
        default=None,
        ge=0,
        description="Blocks in use: each engine's vllm:kv_cache_usage_perc times its blocks.",
    )
    kv_block_size: int | None = Field(
        default=None, ge=1, description="Tokens per KV-cache block (block_size)."
    )
    energy_joules: float | None = Field(
        default=None,
        ge=0,
        allow_inf_nan=False,
        description="Host energy the agent measured since it started (RAPL package domains "
        "and NVML devices, wraps unfolded). None: no energy counter (see energy_source).",
    )
    energy_source: str = Field(
        default="absent: not measured",
        min_length=1,
        max_length=300,
        description="Where energy_joules comes from (rapl:..., nvml:...), or 'absent: REASON'.",
    )


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
    telemetry: EngineTelemetry | None = Field(
        default=None, description="Engine step, KV-block and energy figures (None: old agent)."
    )
    engine_version: str | None = None
    engine_build: str | None = Field(
        default=None,
        max_length=200,
        description="The engine's version and the specroute build around it, e.g. "
        "'vllm 0.32.0; specroute 0.1.0 (vllm_fix)'; request records carry it.",
    )
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
