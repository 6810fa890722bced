"""request_records: tenant, model and arm may be empty (requests refused before routing)

A request the gateway refuses before routing it (bad key, invalid body, unknown
model) now gets a record with its typed error: it has no arm, no model, and no
tenant when the key was not recognised.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 11:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (
    ("tenant_id", sa.Integer()),
    ("tenant", sa.String(length=100)),
    ("model", sa.String(length=256)),
    ("arm", sa.String(length=16)),
)


def upgrade() -> None:
    with op.batch_alter_table("request_records") as batch:
        for name, type_ in COLUMNS:
            batch.alter_column(name, existing_type=type_, nullable=True)


def downgrade() -> None:
    op.execute(
        "DELETE FROM request_records WHERE arm IS NULL OR tenant_id IS NULL OR model IS NULL"
    )
    with op.batch_alter_table("request_records") as batch:
        for name, type_ in COLUMNS:
            batch.alter_column(name, existing_type=type_, nullable=False)
