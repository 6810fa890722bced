"""pairs, pools, tenants: a version column for ETag / If-Match

Segments and rollouts already had one; the other resources an admin can PATCH
ignored If-Match, so a stale update silently overwrote a concurrent one. Existing
rows start at version 1.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("pairs", "pools", "tenants")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column("version", sa.Integer(), nullable=False, server_default=sa.text("1"))
            )
        # NOTE: the server default only fills existing rows; the ORM sets new ones.
        with op.batch_alter_table(table) as batch:
            batch.alter_column("version", server_default=None)


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("version")
