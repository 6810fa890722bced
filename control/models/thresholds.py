"""Versioned threshold sets: a change is a new version of the same name."""

from datetime import datetime

from sqlalchemy import Float, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from control.models.base import Base, utcnow


class ThresholdSet(Base):
    __tablename__ = "threshold_sets"
    __table_args__ = (UniqueConstraint("name", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), index=True)
    version: Mapped[int]
    min_acceptance_rate: Mapped[float] = mapped_column(Float)
    min_mean_acceptance_length: Mapped[float] = mapped_column(Float)
    min_speedup: Mapped[float] = mapped_column(Float)
    max_kv_cache_usage: Mapped[float] = mapped_column(Float)
    min_samples: Mapped[int]
    stage_dwell_seconds: Mapped[int]
    guard_dwell_seconds: Mapped[int]
    probation_percentage: Mapped[float] = mapped_column(Float)
    cooldown_seconds: Mapped[int]
    memory_pressure_beats: Mapped[int] = mapped_column(default=3)
    draft_unavailable_seconds: Mapped[int] = mapped_column(default=60)
    max_inconclusive_rounds: Mapped[int] = mapped_column(default=5)
    # "pause" or "rollback": see control/thresholds/schemas.py.
    no_benefit_action: Mapped[str] = mapped_column(
        String(16), default="pause", server_default="pause"
    )
    sprt_beta: Mapped[float] = mapped_column(Float, default=0.05)
    # One family-wise false-alarm budget for every test that can flip a rollout,
    # over a horizon of telemetry windows (see control/stats/sequential.py).
    false_alarm_rate: Mapped[float] = mapped_column(Float, default=0.01)
    false_alarm_horizon_windows: Mapped[int] = mapped_column(default=1000)
    acceptance_indifference: Mapped[float] = mapped_column(Float, default=0.1)
    latency_margin: Mapped[float] = mapped_column(Float, default=0.1)
    ttft_margin: Mapped[float] = mapped_column(Float, default=0.25)
    error_rate_margin: Mapped[float] = mapped_column(Float, default=0.01)
    error_rate_relative_margin: Mapped[float] = mapped_column(Float, default=0.5)
    holdout_percentage: Mapped[float] = mapped_column(Float, default=10.0)
    min_block_requests: Mapped[int] = mapped_column(default=10)
    # The offline stage's exit criteria (an offline evaluation on the segment's eval set).
    offline_min_mean_acceptance_length: Mapped[float] = mapped_column(Float, default=1.5)
    offline_min_expected_speedup: Mapped[float] = mapped_column(Float, default=1.05)
    offline_min_cases: Mapped[int] = mapped_column(default=20)
    offline_max_stale_fraction: Mapped[float] = mapped_column(Float, default=0.1)
    # The shadow stage: the share of the segment's requests mirrored to the spec pool.
    shadow_percentage: Mapped[float] = mapped_column(Float, default=10.0)
    # The output contract in production (see control/automation/contract.py): the share
    # of requests run on both arms and compared, the greedy mismatch rate allowed, and
    # how far from 1/2 the sampled pairs' split may provably be.
    contract_pair_percentage: Mapped[float] = mapped_column(Float, default=2.0)
    contract_max_mismatch: Mapped[float] = mapped_column(Float, default=0.01)
    contract_sampled_margin: Mapped[float] = mapped_column(Float, default=0.15)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
