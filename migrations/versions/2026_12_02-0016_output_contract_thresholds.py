"""threshold_sets: the output contract's paired-check share and allowed mismatch rate

A rollout's greedy requests are now sampled (`contract_pair_percentage`) and run on both
arms; the automation disables a rollout whose unequal-pair rate is provably above
`contract_max_mismatch`. Existing threshold sets get the defaults.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (("contract_pair_percentage", "2.0"), ("contract_max_mismatch", "0.01"))


def upgrade() -> None:
    with op.batch_alter_table("threshold_sets") as batch:
        for name, default in _COLUMNS:
            batch.add_column(sa.Column(name, sa.Float(), nullable=False, server_default=default))
    # NOTE: the server defaults only fill existing rows; the ORM supplies values.
    with op.batch_alter_table("threshold_sets") as batch:
        for name, _ in _COLUMNS:
            batch.alter_column(name, server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("threshold_sets") as batch:
        for name, _ in reversed(_COLUMNS):
            batch.drop_column(name)
