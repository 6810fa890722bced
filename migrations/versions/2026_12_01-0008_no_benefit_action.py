"""threshold_sets.no_benefit_action: pause or roll back a stage that conclusively loses

A threshold set now says what a stage does once its speedup at its own load is
conclusively below min_speedup: pause (the old behaviour, kept for existing
rows) or roll back.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("threshold_sets") as batch:
        batch.add_column(
            sa.Column(
                "no_benefit_action", sa.String(length=16), nullable=False, server_default="pause"
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("threshold_sets") as batch:
        batch.drop_column("no_benefit_action")
