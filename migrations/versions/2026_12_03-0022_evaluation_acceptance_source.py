"""offline_evaluations.acceptance_source; case results' acceptance nullable

`engine evaluate` against an engine without per-request speculative metrics reads
acceptance from the engine's Prometheus counters over the whole run: the
aggregates are exact, but no case has its own acceptance. The evaluation says
where its acceptance came from (`per_request`, what every evaluation before this
had, or `engine_counters`), and a case result's drafts and accepted_per_position
are null when not measured, rather than an invented zero.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("offline_evaluations") as batch:
        batch.add_column(
            sa.Column(
                "acceptance_source",
                sa.String(length=32),
                nullable=False,
                server_default="per_request",
            )
        )
    with op.batch_alter_table("evaluation_case_results") as batch:
        batch.alter_column("drafts", existing_type=sa.Integer(), nullable=True)
        batch.alter_column("accepted_per_position", existing_type=sa.JSON(), nullable=True)


def downgrade() -> None:
    # NOTE: rows from engine counters have no per-case numbers; they go back as zeros.
    op.execute("UPDATE evaluation_case_results SET drafts = 0 WHERE drafts IS NULL")
    op.execute(
        "UPDATE evaluation_case_results SET accepted_per_position = '[]' "
        "WHERE accepted_per_position IS NULL"
    )
    with op.batch_alter_table("evaluation_case_results") as batch:
        batch.alter_column("accepted_per_position", existing_type=sa.JSON(), nullable=False)
        batch.alter_column("drafts", existing_type=sa.Integer(), nullable=False)
    with op.batch_alter_table("offline_evaluations") as batch:
        batch.drop_column("acceptance_source")
