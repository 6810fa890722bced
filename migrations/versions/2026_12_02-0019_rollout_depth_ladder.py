"""rollouts: depth_ladder (depth chosen by load)

A rollout may carry a ladder of spec pools whose pair versions differ only in k,
each with the per-worker load up to which it is the best depth; the snapshot
carries it and the gateway routes the spec arm by load. Existing rows keep NULL
(no ladder).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02 11:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("rollouts") as batch:
        batch.add_column(sa.Column("depth_ladder", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rollouts") as batch:
        batch.drop_column("depth_ladder")
