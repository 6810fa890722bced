"""telemetry_windows: the rollout is part of a window's unique key

One segment can carry rollouts for several models; their windows differed only
by rollout and a second one was silently dropped as a duplicate. The reported
rollout id (0 for none) joins the key.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 13:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_KEY = ["source", "window_start", "segment_id", "arm", "pair_version_id"]
OLD_NAME = "uq_telemetry_windows_source_window_start_segment_id_arm_pair_version_id"


def upgrade() -> None:
    with op.batch_alter_table("telemetry_windows") as batch:
        batch.add_column(sa.Column("rollout_key", sa.Integer(), nullable=False, server_default="0"))
        batch.drop_constraint(op.f(OLD_NAME), type_="unique")
        batch.create_unique_constraint("uq_telemetry_windows_key", [*OLD_KEY, "rollout_key"])
    op.execute("UPDATE telemetry_windows SET rollout_key = COALESCE(rollout_id, 0)")


def downgrade() -> None:
    with op.batch_alter_table("telemetry_windows") as batch:
        batch.drop_constraint("uq_telemetry_windows_key", type_="unique")
        batch.create_unique_constraint(op.f(OLD_NAME), OLD_KEY)
        batch.drop_column("rollout_key")
