"""threshold_sets: the output contract's margin for sampled (T > 0) pairs

Sampled requests are now paired too: the automation disables a rollout whose sampled
pairs' split (spec arm's completion likelier vs the baseline's) is provably further
from 1/2 than `contract_sampled_margin`. Existing threshold sets get the default.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-02 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("threshold_sets") as batch:
        batch.add_column(
            sa.Column("contract_sampled_margin", sa.Float(), nullable=False, server_default="0.15")
        )
    # NOTE: the server default only fills existing rows; the ORM supplies values.
    with op.batch_alter_table("threshold_sets") as batch:
        batch.alter_column("contract_sampled_margin", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("threshold_sets") as batch:
        batch.drop_column("contract_sampled_margin")
