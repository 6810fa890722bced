"""workers.cpu_seconds, generation_tokens: engine cost counters from heartbeats

Agents now report the CPU seconds of the server's process tree and the tokens its
engine emitted; control exports them (with the accepted-token counter) so the cost
per accepted token is a Prometheus rate ratio per pool and pair version.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("cpu_seconds", sa.Float(), nullable=True))
        batch.add_column(sa.Column("generation_tokens", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("generation_tokens")
        batch.drop_column("cpu_seconds")
