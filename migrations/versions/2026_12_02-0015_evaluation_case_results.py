"""evaluation_case_results, and blocking boundary cases on eval_cases

An offline evaluation kept only aggregates and label slices, so the cases that
changed between two evaluations could not be listed. Each evaluation may now
carry one row per case (its key, outcome, tokens, acceptance per position; no
text), counted in offline_evaluations.case_result_count. A case may be marked
blocking, at a boundary (authorization, privacy, safety, irreversible_action):
a regression on it blocks `start`. Existing cases are not blocking.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "evaluation_case_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("case_key", sa.String(length=200), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("drafts", sa.Integer(), nullable=False),
        sa.Column("accepted_per_position", sa.JSON(), nullable=False),
        sa.Column("acceptance_rate", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["offline_evaluations.id"],
            name=op.f("fk_evaluation_case_results_evaluation_id_offline_evaluations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evaluation_case_results")),
        sa.UniqueConstraint(
            "evaluation_id",
            "case_key",
            name=op.f("uq_evaluation_case_results_evaluation_id_case_key"),
        ),
    )
    with op.batch_alter_table("evaluation_case_results") as batch:
        batch.create_index(
            batch.f("ix_evaluation_case_results_evaluation_id"), ["evaluation_id"], unique=False
        )
    with op.batch_alter_table("eval_cases") as batch:
        batch.add_column(
            sa.Column("blocking", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(sa.Column("boundary", sa.String(length=32), nullable=True))
    with op.batch_alter_table("offline_evaluations") as batch:
        batch.add_column(
            sa.Column(
                "case_result_count", sa.Integer(), nullable=False, server_default=sa.text("0")
            )
        )
    # NOTE: the server defaults only fill existing rows; the ORM sets new ones.
    with op.batch_alter_table("eval_cases") as batch:
        batch.alter_column("blocking", server_default=None)
    with op.batch_alter_table("offline_evaluations") as batch:
        batch.alter_column("case_result_count", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("offline_evaluations") as batch:
        batch.drop_column("case_result_count")
    with op.batch_alter_table("eval_cases") as batch:
        batch.drop_column("boundary")
        batch.drop_column("blocking")
    with op.batch_alter_table("evaluation_case_results") as batch:
        batch.drop_index(batch.f("ix_evaluation_case_results_evaluation_id"))
    op.drop_table("evaluation_case_results")
