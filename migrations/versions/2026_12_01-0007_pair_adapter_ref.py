"""pair_versions.adapter_ref and workers.model_digest: identity of what is served

A pair version built for a target adapter names it (adapter_id, the name
requests use) and now says where it lives, so the engine launcher can serve it.
Workers report the weights digest of the target they loaded, so one that
differs from its pool's pair version is excluded from routing.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("pair_versions") as batch:
        batch.add_column(sa.Column("adapter_ref", sa.String(length=1000), nullable=True))
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("model_digest", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("model_digest")
    with op.batch_alter_table("pair_versions") as batch:
        batch.drop_column("adapter_ref")
