"""Sequential verdicts: one false-alarm budget, margins, holdout, load and per-request moments

- threshold_sets: the family-wise false-alarm rate and its horizon replace the
  per-test levels (error_rate_alpha, sprt_alpha); the acceptance indifference
  zone, latency/TTFT/error margins, the baseline holdout at full and the
  minimum requests per monitoring block become threshold-set fields.
- rollouts.exposed_since: when the current exposure began; an index on
  rollouts.spec_pool_id (every heartbeat looks its pool's rollouts up).
- telemetry_windows.moments: load at dispatch and per-request acceptance moments
  (per-load histograms live in the existing histograms document).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 21:00:00
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NEW_THRESHOLDS: list[tuple[str, sa.types.TypeEngine[Any], str]] = [
    ("false_alarm_rate", sa.Float(), "0.01"),
    ("false_alarm_horizon_windows", sa.Integer(), "1000"),
    ("acceptance_indifference", sa.Float(), "0.1"),
    ("latency_margin", sa.Float(), "0.1"),
    ("ttft_margin", sa.Float(), "0.25"),
    ("error_rate_margin", sa.Float(), "0.01"),
    ("error_rate_relative_margin", sa.Float(), "0.5"),
    ("holdout_percentage", sa.Float(), "5.0"),
    ("min_block_requests", sa.Integer(), "10"),
]


def upgrade() -> None:
    with op.batch_alter_table("threshold_sets") as batch:
        for name, type_, default in _NEW_THRESHOLDS:
            batch.add_column(sa.Column(name, type_, nullable=False, server_default=default))
        batch.drop_column("error_rate_alpha")
        batch.drop_column("sprt_alpha")
    # NOTE: the server defaults only fill existing rows; the ORM supplies values.
    with op.batch_alter_table("threshold_sets") as batch:
        for name, _type, _default in _NEW_THRESHOLDS:
            batch.alter_column(name, server_default=None)
    with op.batch_alter_table("rollouts") as batch:
        batch.add_column(sa.Column("exposed_since", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_rollouts_spec_pool_id", ["spec_pool_id"])
    op.execute(
        "UPDATE rollouts SET exposed_since = state_entered_at "
        "WHERE state IN ('canary', 'ramping', 'full', 'probation')"
    )
    with op.batch_alter_table("telemetry_windows") as batch:
        batch.add_column(sa.Column("moments", sa.JSON(), nullable=False, server_default="{}"))
    with op.batch_alter_table("telemetry_windows") as batch:
        batch.alter_column("moments", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("telemetry_windows") as batch:
        batch.drop_column("moments")
    with op.batch_alter_table("rollouts") as batch:
        batch.drop_index("ix_rollouts_spec_pool_id")
        batch.drop_column("exposed_since")
    with op.batch_alter_table("threshold_sets") as batch:
        batch.add_column(
            sa.Column("error_rate_alpha", sa.Float(), nullable=False, server_default="0.01")
        )
        batch.add_column(sa.Column("sprt_alpha", sa.Float(), nullable=False, server_default="0.05"))
        for name, _type, _default in reversed(_NEW_THRESHOLDS):
            batch.drop_column(name)
