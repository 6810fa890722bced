"""Gateway settings (env prefix SPECROUTE_GATEWAY_), one group per subsystem.

See specwire.settings for how a group's fields map to variables and keywords."""

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from specwire.logs import LogFormat
from specwire.settings import AuthFailureLimits, PlaneSettings, SettingsGroup, TlsFiles

DEV_INTERNAL_TOKEN = "specroute-internal-dev"


class MissingToken(RuntimeError):
    """Raised at start when the gateway needs an internal token and has none."""


def _default_gateway_id() -> str:
    # NOTE: the process id too: two gateways on one host (two ports, or a restart
    # overlapping its predecessor) must not share an id, or the control plane would
    # store only one of two batches for the same window.
    return f"gw-{socket.gethostname()}-{os.getpid()}"


class SnapshotSettings(SettingsGroup):
    """Where the policy snapshot comes from."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_GATEWAY_SNAPSHOT_", extra="ignore")
    renamed: ClassVar[Mapping[str, str]] = {"poll_seconds": "poll_s"}

    poll_s: float = Field(
        default=1.0, gt=0, description="Interval between ETag polls of the policy snapshot."
    )
    file: Path | None = Field(
        default=None,
        description=(
            "Serve from a static PolicySnapshot JSON file instead of polling control "
            "(standalone/dev and component tests). Re-read when its mtime changes."
        ),
    )


class UpstreamSettings(SettingsGroup):
    """Talking to engine workers: deadlines and limits."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_GATEWAY_", extra="ignore")

    connect_timeout_s: float = Field(
        default=2.0, gt=0, description="Connect timeout to an engine worker."
    )
    first_token_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Streaming: longest wait for the engine's first chunk after sending.",
    )
    response_header_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description=(
            "A worker that took the request and went silent (its host partitioned, or the "
            "engine hung): streaming, the engine's status line is not in this long after "
            "sending (engines answer it before any token); any request, its host leaves "
            "the sent request unacknowledged this long (TCP_USER_TIMEOUT, Linux). The "
            "worker counts a breaker failure, its idle connections are dropped and the "
            "request goes once to another worker of the pool; a second silent one is a "
            "504 `engine_unresponsive` (unless the fallback pool takes it)."
        ),
    )
    hold_stream_headers: bool = Field(
        default=False,
        description=(
            "Streaming: send the status line only with the engine's first token, so a "
            "first-token timeout is a 504 and an engine failure before it a 502. Off: "
            "headers go out when the engine accepts the request (as the engine itself "
            "does) and such a failure is a typed error event after a 200; the client "
            "then reads the headers before the first token, not after it."
        ),
    )
    idle_timeout_s: float = Field(
        default=30.0, gt=0, description="Streaming: longest gap between two engine chunks."
    )
    request_timeout_s: float = Field(
        default=600.0,
        gt=0,
        description="Non-streaming: longest wait for the engine's complete response.",
    )
    engine_max_body_bytes: int = Field(
        default=16 << 20,
        ge=1024,
        description=(
            "Largest non-streamed engine answer, and largest single event of a streamed "
            "one, the gateway reads; a larger one is a 502 engine_body_too_large (or an "
            "engine_event_too_large error event), never read whole."
        ),
    )


class BreakerSettings(SettingsGroup):
    """Each worker's circuit breaker."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_GATEWAY_BREAKER_", extra="ignore")

    failure_threshold: int = Field(
        default=3,
        ge=1,
        description="Consecutive connect failures/5xx that open a worker's breaker.",
    )
    cooldown_s: float = Field(
        default=5.0, gt=0, description="Open breaker: wait this long before one half-open trial."
    )


class QuotaSettings(SettingsGroup):
    """Shared quotas on Redis and what happens when it fails."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_GATEWAY_QUOTA_", extra="ignore")

    redis_failure: Literal["open", "closed", "local"] = Field(
        default="local",
        description=(
            "Quota behaviour while Redis is down or slow: `local` enforces each tenant's "
            "budget per gateway replica in memory, counting what Redis had already "
            "admitted (one replica never exceeds the budget, N replicas at most N x), "
            "`open` admits everything, `closed` refuses limited tenants with 503 "
            "quota_unavailable."
        ),
    )
    redis_timeout_s: float = Field(
        default=0.1,
        gt=0,
        description="Longest wait for one Redis quota call before it counts as a failure.",
    )
    redis_retry_s: float = Field(
        default=2.0,
        gt=0,
        description=(
            "After a Redis quota failure, how long the failure mode applies before Redis "
            "is tried again (a hung Redis costs one timeout per interval, not per request)."
        ),
    )


class AuthFailureSettings(AuthFailureLimits):
    """Rate limit on failed API-key authentications, per source address."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_GATEWAY_AUTH_FAILURE_", extra="ignore")


class ExposureSettings(SettingsGroup):
    """What /metrics and the API docs show, and to whom."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_GATEWAY_", extra="ignore")

    metrics_token: SecretStr | None = Field(
        default=None,
        description=(
            "When set, GET /metrics needs `Authorization: Bearer <this>` (401 otherwise). "
            "Unset: /metrics is open (bind it to a private network)."
        ),
    )
    docs_enabled: bool = Field(
        default=True,
        description="Serve /docs, /redoc and /openapi.json. false: all three are 404.",
    )
    tenant_label_hash: bool = Field(
        default=False,
        description=(
            "Metric labels name a tenant by `t-` + the first 12 hex digits of the sha256 "
            "of its name instead of the name (still at most the top-k tenants plus other)."
        ),
    )
    segment_top_k: int = Field(
        default=20, ge=1, description="Segments with their own metric label; the rest: 'other'."
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default=[],
        description=(
            "Browser origins allowed to call the gateway (CORS), comma-separated, e.g. "
            "`https://app.example.com,http://localhost:3000`; `*` allows any. Keys go in "
            "the Authorization header, never cookies, so no credentials mode. Empty (the "
            "default): no CORS headers, and a preflight OPTIONS is 405 like any OPTIONS."
        ),
    )

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("cors_origins")
    @classmethod
    def _check_origins(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            if origin == "*":
                continue
            parts = urlsplit(origin)
            try:
                port = f":{parts.port}" if parts.port else ""
            except ValueError:  # not a number, or out of range
                port = None
            if parts.scheme not in ("http", "https") or not parts.hostname or port is None:
                raise ValueError(f"CORS origin {origin!r} is not scheme://host[:port] or *")
            if parts.path or parts.query or parts.fragment or parts.username:
                # A browser's Origin never has these; such an entry would match nothing.
                raise ValueError(
                    f"CORS origin {origin!r} is more than an origin: write "
                    f"{parts.scheme}://{parts.hostname}{port}"
                )
        return origins


class TelemetrySettings(SettingsGroup):
    """Windows, records and their flush to control."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_GATEWAY_TELEMETRY_", extra="ignore")
    renamed: ClassVar[Mapping[str, str]] = {
        "window_seconds": "window_s",
        "flush_seconds": "flush_s",
    }

    window_s: int = Field(
        default=10, ge=1, description="Width of one telemetry aggregation window."
    )
    enabled: bool | None = Field(
        default=None,
        description=(
            "Flush telemetry to control. Unset: on when polling control, off with a "
            "snapshot file (no control plane to flush to)."
        ),
    )
    flush_s: float = Field(
        default=5.0, gt=0, description="Interval between telemetry flushes to control."
    )
    max_pending_windows: int = Field(
        default=360,
        ge=1,
        description="Closed windows kept while control is down; the oldest are dropped beyond.",
    )
    max_records_per_window: int = Field(
        default=1000,
        ge=0,
        description=(
            "Per-request records (sampled per tenant) shipped per telemetry window; beyond, "
            "records are counted as dropped (the window's counts still hold every request). "
            "Memory while control is down: at most this times the pending windows."
        ),
    )
    max_refusal_records_per_window: int = Field(
        default=100,
        ge=0,
        description=(
            "Records of requests refused before routing (bad key, bad body, ...) shipped per "
            "telemetry window, on top of telemetry_max_records_per_window: a flood of refused "
            "requests cannot push routed requests' records out. Beyond, counted as dropped."
        ),
    )


class ShadowSettings(SettingsGroup):
    """The shadow stage's mirrored requests."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_GATEWAY_SHADOW_", extra="ignore")

    max_inflight: int = Field(
        default=4,
        ge=0,
        le=10_000,
        description=(
            "Shadow stage: most mirrored requests this gateway keeps in flight on spec pools; "
            "a mirror beyond the cap is skipped (0: no mirroring). Caps the shadow's load."
        ),
    )
    budget_s: float = Field(
        default=30.0,
        gt=0,
        description="Shadow stage: a mirrored request still running after this is cancelled.",
    )


class TlsSettings(TlsFiles):
    """HTTPS served by the gateway itself."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_GATEWAY_SSL_", extra="ignore")


class GatewaySettings(PlaneSettings):
    """The gateway's settings: its own fields and one group per subsystem."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_GATEWAY_", extra="ignore")
    renamed: ClassVar[Mapping[str, str]] = {"shutdown_grace_seconds": "shutdown_grace_s"}

    control_url: str = Field(
        default="http://127.0.0.1:8000",
        description="Base URL of the control plane (internal API at /internal/v1).",
    )
    internal_token: SecretStr | None = Field(
        default=None,
        description=(
            "Bearer token for the control plane's internal API. Required unless the "
            "gateway serves a snapshot file without telemetry, or dev_tokens is set."
        ),
    )
    dev_tokens: bool = Field(
        default=False,
        description=(
            f"Development only: an unset internal token falls back to `{DEV_INTERNAL_TOKEN}` "
            "(logged as a warning at start)."
        ),
    )
    gateway_id: str = Field(
        default_factory=_default_gateway_id,
        min_length=1,
        max_length=200,
        description=(
            "Id this gateway process reports telemetry under. Batches are idempotent per "
            "id and window, so no two running processes may share one. "
            "Default: gw-<hostname>-<pid>. Under `serve --workers N` a set id gets each "
            "process's pid appended (<id>-<pid>)."
        ),
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis URL for snapshot change notifications and shared quotas. Unset: none.",
    )
    max_body_bytes: int = Field(
        default=1 << 20, ge=1024, description="Larger request bodies are refused with 413."
    )
    request_body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description=(
            "Longest time to receive a request's whole body, from the first read of it; "
            "past it the request is a 408 `request_body_timeout` and its connection is "
            "closed (a client that trickles its body holds nothing longer)."
        ),
    )
    log_format: LogFormat = Field(
        default="text",
        description=(
            "`text` (uvicorn's lines) or `json`: one JSON object per line with ts, level, "
            "logger, message and the request id (`x-request-id`) of the request it belongs to."
        ),
    )
    shutdown_grace_s: int = Field(
        default=30,
        ge=0,
        description=(
            "On SIGTERM, how long `gateway serve` lets in-flight requests and streams finish "
            "after it stops accepting connections; still running after it, they are cancelled "
            "(their clients see the stream end without [DONE]). Telemetry is flushed after."
        ),
    )
    ready_requires_fresh_snapshot: bool = Field(
        default=False,
        description=(
            "`/readyz` answers 503 while the snapshot is past its TTL. Off: a stale gateway "
            "stays ready (it serves every segment on the baseline path), so a control outage "
            "that makes every replica stale does not empty the gateway's Service."
        ),
    )
    max_concurrent_requests: int = Field(
        default=0,
        ge=0,
        description=(
            "Most completion requests (chat and completions, streamed or not) this gateway "
            "process serves at once; one more is answered at once, before its body is read, "
            "with a 503 `gateway_overloaded` and `Retry-After` (health, readiness, metrics "
            "and models are never limited). Per process: under `serve --workers N` the host "
            "serves up to N times it. 0: unlimited."
        ),
    )
    overload_retry_after_s: int = Field(
        default=1,
        ge=1,
        description="The `Retry-After` (whole seconds) of a 503 `gateway_overloaded`.",
    )
    snapshot: SnapshotSettings = Field(default_factory=SnapshotSettings)
    upstream: UpstreamSettings = Field(default_factory=UpstreamSettings)
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    quota: QuotaSettings = Field(default_factory=QuotaSettings)
    auth_failure: AuthFailureSettings = Field(default_factory=AuthFailureSettings)
    exposure: ExposureSettings = Field(default_factory=ExposureSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    shadow: ShadowSettings = Field(default_factory=ShadowSettings)
    tls: TlsSettings = Field(default_factory=TlsSettings)

    def talks_to_control(self) -> bool:
        # Telemetry is off by default in snapshot-file mode (see telemetry.enabled).
        return self.snapshot.file is None or bool(self.telemetry.enabled)

    def internal_secret(self) -> str:
        """The token for control's internal API; "" in standalone file mode."""
        if self.internal_token is not None and self.internal_token.get_secret_value():
            return self.internal_token.get_secret_value()
        if self.dev_tokens:
            return DEV_INTERNAL_TOKEN
        if not self.talks_to_control():
            return ""
        raise MissingToken(
            "SPECROUTE_GATEWAY_INTERNAL_TOKEN must be set to talk to the control plane. "
            "For local development only, set SPECROUTE_GATEWAY_DEV_TOKENS=1."
        )
