"""Control-plane settings (env prefix SPECROUTE_)."""

from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from control.contract import QuotaWeights


class ControlSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SPECROUTE_", env_nested_delimiter="__", extra="ignore"
    )

    data_dir: Path = Field(
        default=Path("data"),
        description="Directory for embedded state: the SQLite database, broker and reports.",
    )
    database_url: str | None = Field(
        default=None,
        description=(
            "SQLAlchemy URL of the control database. Unset: an SQLite file "
            "`control.db` under the data dir. PostgreSQL: postgresql+psycopg://..."
        ),
    )
    admin_token: SecretStr = Field(
        default=SecretStr("specroute-admin-dev"),
        description="Bootstrap admin bearer token with admin:read and admin:write scopes.",
    )
    internal_token: SecretStr = Field(
        default=SecretStr("specroute-internal-dev"),
        description="Bearer token gateways and engine agents use on the internal API.",
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis URL for snapshot change notifications (pub/sub). Unset: none.",
    )
    snapshot_ttl_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Age after which a gateway fails safe to the baseline arm.",
    )
    worker_stale_after_seconds: float = Field(
        default=15.0,
        gt=0,
        description=(
            "A worker whose last heartbeat is older than this (about 3 agent heartbeat "
            "intervals) counts as unhealthy in the snapshot."
        ),
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
    evaluation_interval_seconds: float = Field(
        default=60.0,
        gt=0,
        description="Beat interval of the canary evaluation (one inconclusive round each).",
    )
    guard_interval_seconds: float = Field(
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
    probation_interval_seconds: float = Field(
        default=30.0,
        gt=0,
        description="Beat interval of the probation sweep that re-enables disabled rollouts.",
    )
    depth_interval_seconds: float = Field(
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
    monitor_lookback_seconds: float = Field(
        default=3 * 3600.0,
        gt=0,
        description=(
            "How far back the sequential monitors read a rollout's telemetry: from the "
            "start of its exposure, but at most this long (about the false-alarm horizon "
            "of 1,000 ten-second windows)."
        ),
    )

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'control.db').resolve()}"

    def resolved_broker_url(self) -> str:
        if self.broker_url:
            return self.broker_url
        return f"sqla+sqlite:///{(self.data_dir / 'broker.db').resolve()}"

    def resolved_result_backend(self) -> str:
        if self.result_backend:
            return self.result_backend
        return f"db+sqlite:///{(self.data_dir / 'results.db').resolve()}"


@lru_cache(maxsize=1)
def get_settings() -> ControlSettings:
    return ControlSettings()
