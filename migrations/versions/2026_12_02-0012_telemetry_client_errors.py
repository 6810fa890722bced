"""telemetry_windows.client_errors: requests refused for their own fault, counted apart

A 4xx relayed from an engine (an invalid request such as n=2 at temperature 0) or a
spent quota used to count as an error of whichever arm carried it, feeding the error
monitor and the error-rate alert. Gateways now count those as client errors in their
own column; `errors` keeps arm errors only. Windows stored before have 0 here.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-02 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("telemetry_windows") as batch:
        batch.add_column(
            sa.Column("client_errors", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("telemetry_windows") as batch:
        batch.drop_column("client_errors")
