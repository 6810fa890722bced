"""request_records, workers: engine_build (reproduction metadata)

A request record now names the build that produced its tokens: the engine's
version and the specroute build around it, as the serving worker's agent reports
it in its heartbeats (workers.engine_build, compiled into the snapshot). The
sampling seed and the digests of stop strings, logit bias and the structured-output
schema ride in the existing `sampling` JSON column. Existing rows keep NULL.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("request_records", "workers")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("engine_build", sa.String(length=200), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("engine_build")
