"""segments.ttft_slo_p95_s, tpot_slo_p95_s: a latency SLO per segment

The burn-rate alerts used one global target (TTFT 1 s, TPOT 100 ms at p95). Each
segment now carries its own; existing rows keep the old global values.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01 10:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("segments") as batch:
        batch.add_column(
            sa.Column("ttft_slo_p95_s", sa.Float(), nullable=False, server_default="1.0")
        )
        batch.add_column(
            sa.Column("tpot_slo_p95_s", sa.Float(), nullable=False, server_default="0.1")
        )


def downgrade() -> None:
    with op.batch_alter_table("segments") as batch:
        batch.drop_column("tpot_slo_p95_s")
        batch.drop_column("ttft_slo_p95_s")
