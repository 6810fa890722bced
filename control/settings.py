"""Control-plane settings (env prefix SPECROUTE_), one group per subsystem.

See specwire.settings for how a group's fields map to variables and keywords."""

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from specwire import QuotaWeights
from specwire.admin_client import DEV_ADMIN_TOKEN as DEV_ADMIN_TOKEN
from specwire.artifacts import default_model_roots
from specwire.logs import LogFormat
from specwire.settings import AuthFailureLimits, PlaneSettings, SettingsGroup, TlsFiles

DEV_INTERNAL_TOKEN = "specroute-internal-dev"


class MissingTokens(RuntimeError):
    """Raised at start when a required token is unset and dev tokens are off."""


class DatabaseSettings(SettingsGroup):
    """The control database and the API's time limits on it."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_DATABASE_", extra="ignore")

    url: str | None = Field(
        default=None,
        description=(
            "SQLAlchemy URL of the control database. Unset: an SQLite file "
            "`control.db` under the data dir. PostgreSQL: postgresql+psycopg://..."
        ),
    )
    lock_timeout_ms: int = Field(
        default=2000,
        ge=0,
        description=(
            "PostgreSQL lock_timeout of the API's connections: a request waiting longer "
            "for a row or table lock fails with 503 database_busy and Retry-After. 0: no limit."
        ),
    )
    statement_timeout_ms: int = Field(
        default=15000,
        ge=0,
        description=(
            "PostgreSQL statement_timeout of the API's connections (503 database_busy "
            "beyond it). 0: no limit."
        ),
    )


class AuthFailureSettings(AuthFailureLimits):
    """Rate limit on failed authentications on the admin and internal APIs, per address."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_AUTH_FAILURE_", extra="ignore")


class ExposureSettings(SettingsGroup):
    """What /metrics and the API docs show, and to whom."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_", extra="ignore")

    metrics_token: SecretStr | None = Field(
        default=None,
        description=(
            "When set, GET /metrics needs `Authorization: Bearer <this>` (401 otherwise). "
            "Unset: /metrics is open (it carries no secrets; bind it to a private network)."
        ),
    )
    docs_enabled: bool = Field(
        default=True,
        description="Serve /docs, /redoc and /openapi.json. false: all three are 404.",
    )


class WorkerSettings(SettingsGroup):
    """When an engine worker counts as stale."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_WORKER_", extra="ignore")
    renamed: ClassVar[Mapping[str, str]] = {
        "stale_after_seconds": "stale_after_s",
        "restart_grace_seconds": "restart_grace_s",
    }

    stale_after_s: float = Field(
        default=15.0,
        gt=0,
        description=(
            "A worker whose last heartbeat is older than this (about 3 agent heartbeat "
            "intervals) counts as unhealthy in the snapshot."
        ),
    )
    restart_grace_s: float = Field(
        default=5.0,
        ge=0,
        description=(
            "After the control plane starts, how long no worker counts as stale (about one "
            "agent heartbeat interval): staleness is judged from heartbeats received since "
            "the restart, not from an outage of control itself."
        ),
    )


class CelerySettings(SettingsGroup):
    """The automation's broker and result backend."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_", extra="ignore")

    broker_url: str | None = Field(
        default=None,
        description=(
            "Celery broker URL. Unset: kombu's SQLAlchemy transport on `broker.db` under the "
            "data dir (embedded). Production: redis://... or amqp://..."
        ),
    )
    result_backend: str | None = Field(
        default=None,
        description=(
            "Celery result backend URL. Unset: `db+sqlite:///` on `results.db` under the "
            "data dir. Production: redis://... (or db+postgresql+psycopg://...)."
        ),
    )


class AutomationSettings(SettingsGroup):
    """The beat's jobs: how often each runs and what it reads."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_", extra="ignore")
    renamed: ClassVar[Mapping[str, str]] = {
        "evaluation_interval_seconds": "evaluation_interval_s",
        "guard_interval_seconds": "guard_interval_s",
        "probation_interval_seconds": "probation_interval_s",
        "depth_interval_seconds": "depth_interval_s",
        "monitor_lookback_seconds": "monitor_lookback_s",
        "request_retention_interval_seconds": "request_retention_interval_s",
    }

    evaluation_interval_s: float = Field(
        default=60.0,
        gt=0,
        description="Beat interval of the canary evaluation (one inconclusive round each).",
    )
    guard_interval_s: float = Field(
        default=15.0,
        gt=0,
        description="Beat interval of the guards (acceptance, memory, draft, speedup).",
    )
    guard_on_telemetry: bool = Field(
        default=True,
        description=(
            "Send a rollout a guard task as soon as a telemetry batch stores its windows, "
            "besides the beat (a regression is judged when its evidence lands)."
        ),
    )
    probation_interval_s: float = Field(
        default=30.0,
        gt=0,
        description="Beat interval of the probation sweep that re-enables disabled rollouts.",
    )
    depth_interval_s: float = Field(
        default=3600.0,
        gt=0,
        description="Beat interval of the depth advice job.",
    )
    depth_max_k: int = Field(
        default=8,
        ge=1,
        le=32,
        description="Longest speculative length depth advice considers.",
    )
    monitor_lookback_s: float = Field(
        default=3 * 3600.0,
        gt=0,
        description=(
            "How far back the sequential monitors read a rollout's telemetry: from the "
            "start of its exposure, but at most this long (about the false-alarm horizon "
            "of 1,000 ten-second windows)."
        ),
    )
    request_record_retention_days: float = Field(
        default=7.0,
        gt=0,
        description=(
            "Per-request records older than this are deleted by the retention job "
            "(fractions of a day allowed)."
        ),
    )
    request_retention_interval_s: float = Field(
        default=3600.0,
        gt=0,
        description="Beat interval of the job that deletes request records past retention.",
    )


class CapacitySettings(SettingsGroup):
    """`specroute control capacity`: scaling pool Deployments."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_CAPACITY_", extra="ignore")
    renamed: ClassVar[Mapping[str, str]] = {"interval_seconds": "interval_s"}

    interval_s: float = Field(
        default=15.0,
        gt=0,
        description=(
            "`specroute control capacity`: seconds between two passes that scale each "
            "pool's Deployment to its desired workers."
        ),
    )
    namespace: str | None = Field(
        default=None,
        description=(
            "`specroute control capacity`: namespace of the pool Deployments. Unset: the "
            "pod's own (its ServiceAccount's namespace file)."
        ),
    )
    deployment_template: str = Field(
        default="specroute-engine-{pool}",
        description=(
            "`specroute control capacity`: the Deployment of a pool, `{pool}` standing for "
            "its name (lower-cased, `_` as `-`)."
        ),
    )


class TlsSettings(TlsFiles):
    """HTTPS served by `control serve` itself."""

    model_config = SettingsConfigDict(env_prefix="SPECROUTE_SSL_", extra="ignore")


class ControlSettings(PlaneSettings):
    """The control plane's settings: its own fields and one group per subsystem."""

    model_config = SettingsConfigDict(
        env_prefix="SPECROUTE_", env_nested_delimiter="__", extra="ignore"
    )
    renamed: ClassVar[Mapping[str, str]] = {
        "snapshot_ttl_seconds": "snapshot_ttl_s",
        "shutdown_grace_seconds": "shutdown_grace_s",
        "readiness_timeout_seconds": "readiness_timeout_s",
    }

    data_dir: Path = Field(
        default=Path("data"),
        description="Directory for embedded state: the SQLite database, broker and reports.",
    )
    admin_token: SecretStr | None = Field(
        default=None,
        description=(
            "Bootstrap admin bearer token with every admin scope. Required: the control "
            "plane refuses to start without it unless dev_tokens is set."
        ),
    )
    internal_token: SecretStr | None = Field(
        default=None,
        description=(
            "Bearer token gateways and engine agents use on the internal API. Required: "
            "the control plane refuses to start without it unless dev_tokens is set."
        ),
    )
    dev_tokens: bool = Field(
        default=False,
        description=(
            "Development only: fill unset admin/internal tokens with the well-known "
            f"`{DEV_ADMIN_TOKEN}` / `{DEV_INTERNAL_TOKEN}` (logged as a warning at start). "
            "`specroute control serve --dev` sets it."
        ),
    )
    model_roots: list[Path] | None = Field(
        default=None,
        description=(
            "Directories a pair version's target_ref/draft_ref must resolve inside (after "
            "symlinks and `..`), as a JSON list. Unset: `models` under the working "
            "directory, the bundled tiny pair and $SPECROUTE_TINY_PAIR_DIR if set."
        ),
    )
    max_body_bytes: int = Field(
        default=1 << 20,
        ge=1024,
        description=(
            "Largest request body (bytes) control reads; larger is 413 body_too_large, "
            "refused while reading (chunked bodies too), after authentication."
        ),
    )
    max_large_body_bytes: int = Field(
        default=10 << 20,
        ge=1024,
        description=(
            "Largest request body (bytes) of the routes that need more: POST "
            "/internal/v1/telemetry, /admin/v1/eval-sets, /admin/v1/eval-sets/{id}/versions "
            "and /admin/v1/evaluations."
        ),
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis URL for snapshot change notifications (pub/sub). Unset: none.",
    )
    snapshot_ttl_s: float = Field(
        default=30.0,
        gt=0,
        description="Age after which a gateway fails safe to the baseline arm.",
    )
    kv_cache_high_usage: float = Field(
        default=0.9,
        gt=0,
        le=1.0,
        description=(
            "KV-cache usage above which a heartbeat counts as high-memory, for pools no "
            "rollout's threshold set covers."
        ),
    )
    quota_weights: QuotaWeights = Field(
        default_factory=QuotaWeights,
        description=(
            "Weights of prompt, completion and rejected draft tokens in a tenant's weighted "
            "token quota (SPECROUTE_QUOTA_WEIGHTS__PROMPT=...)."
        ),
    )
    api_surfaces: list[Literal["admin", "internal"]] = Field(
        default=["admin", "internal"],
        min_length=1,
        description=(
            "Which APIs this process serves, as a JSON list: `admin` (/admin/v1) and/or "
            "`internal` (/internal/v1, gateways and agents). Probes and /metrics are always "
            "served. Kubernetes runs one Deployment per surface so a NetworkPolicy can let "
            "only gateways and agents reach the internal API and only admins the admin API."
        ),
    )
    log_format: LogFormat = Field(
        default="text",
        description=(
            "`text` (uvicorn's lines) or `json`: one JSON object per line with ts, level, "
            "logger, message and the request id (`x-request-id`) of the request it belongs to; "
            "also for `specroute worker` / `beat` (Celery's start-up banner is then off)."
        ),
    )
    shutdown_grace_s: int = Field(
        default=30,
        ge=0,
        description=(
            "On SIGTERM, how long `control serve` lets in-flight requests finish after it "
            "stops accepting connections; still running after it, they are cancelled."
        ),
    )
    readiness_timeout_s: float = Field(
        default=2.0,
        gt=0,
        description="Longest wait of `/readyz` for the database before it answers 503.",
    )
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    auth_failure: AuthFailureSettings = Field(default_factory=AuthFailureSettings)
    exposure: ExposureSettings = Field(default_factory=ExposureSettings)
    workers: WorkerSettings = Field(default_factory=WorkerSettings)
    celery: CelerySettings = Field(default_factory=CelerySettings)
    automation: AutomationSettings = Field(default_factory=AutomationSettings)
    capacity: CapacitySettings = Field(default_factory=CapacitySettings)
    tls: TlsSettings = Field(default_factory=TlsSettings)

    def unset_tokens(self) -> list[str]:
        """Env names of the required tokens that are unset (empty counts as unset)."""
        tokens = {"admin_token": self.admin_token, "internal_token": self.internal_token}
        return [
            f"SPECROUTE_{name.upper()}"
            for name, value in tokens.items()
            if value is None or not value.get_secret_value()
        ]

    def with_required_tokens(self) -> "ControlSettings":
        """These settings with both tokens set; the dev defaults fill in only when
        `dev_tokens` is on. Raises MissingTokens otherwise."""
        missing = self.unset_tokens()
        if not missing:
            return self
        if not self.dev_tokens:
            raise MissingTokens(
                f"{' and '.join(missing)} must be set: without them anyone who knows the "
                "well-known development tokens would hold the control plane. For local "
                "development only, pass --dev (SPECROUTE_DEV_TOKENS=1)."
            )
        return self.model_copy(
            update={
                "admin_token": self.admin_token or SecretStr(DEV_ADMIN_TOKEN),
                "internal_token": self.internal_token or SecretStr(DEV_INTERNAL_TOKEN),
            }
        )

    def admin_secret(self) -> str:
        if self.admin_token is None:
            raise MissingTokens("SPECROUTE_ADMIN_TOKEN is not set")
        return self.admin_token.get_secret_value()

    def internal_secret(self) -> str:
        if self.internal_token is None:
            raise MissingTokens("SPECROUTE_INTERNAL_TOKEN is not set")
        return self.internal_token.get_secret_value()

    def resolved_model_roots(self) -> list[Path]:
        if self.model_roots is not None:
            return [root.resolve() for root in self.model_roots]
        return default_model_roots()

    def resolved_database_url(self) -> str:
        if self.database.url:
            return self.database.url
        return f"sqlite:///{(self.data_dir / 'control.db').resolve()}"

    def resolved_broker_url(self) -> str:
        if self.celery.broker_url:
            return self.celery.broker_url
        return f"sqla+sqlite:///{(self.data_dir / 'broker.db').resolve()}"

    def resolved_result_backend(self) -> str:
        if self.celery.result_backend:
            return self.celery.result_backend
        return f"db+sqlite:///{(self.data_dir / 'results.db').resolve()}"


@lru_cache(maxsize=1)
def get_settings() -> ControlSettings:
    return ControlSettings()
