"""workers: 64-bit memory byte counts

A vLLM server's resident (and GPU) memory is well above 2 GiB, which overflows
PostgreSQL's 32-bit INTEGER, so every real heartbeat failed there. SQLite's
INTEGER is already 64-bit; batch mode keeps the two backends' schemas equal.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 14:05:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.alter_column(
            "process_memory_bytes",
            existing_type=sa.Integer(),
            type_=sa.BigInteger(),
            existing_nullable=False,
        )
        batch.alter_column(
            "gpu_memory_bytes",
            existing_type=sa.Integer(),
            type_=sa.BigInteger(),
            existing_nullable=True,
        )


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.alter_column(
            "gpu_memory_bytes",
            existing_type=sa.BigInteger(),
            type_=sa.Integer(),
            existing_nullable=True,
        )
        batch.alter_column(
            "process_memory_bytes",
            existing_type=sa.BigInteger(),
            type_=sa.Integer(),
            existing_nullable=False,
        )
