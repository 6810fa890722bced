"""workers: the engine telemetry of the last heartbeat (steps, KV blocks, energy)

One JSON column: engine steps, decode seconds, KV blocks used and total, and the
host's energy counter or the reason it is absent, as the agent read them (issue
#25 item 4). NULL for workers whose agent predates it.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("engine_telemetry", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("engine_telemetry")
