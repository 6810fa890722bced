"""telemetry_windows.by_response_position: draft tokens per response-position bucket

Gateways now send, per window, the drafted and accepted tokens of each
response-position bucket (where in the response each verify step began), so control
can show acceptance early and late in answers per segment and pair version. Nullable:
windows stored before, and windows from gateways that do not send it, have none.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03 07:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("telemetry_windows") as batch:
        batch.add_column(sa.Column("by_response_position", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("telemetry_windows") as batch:
        batch.drop_column("by_response_position")
