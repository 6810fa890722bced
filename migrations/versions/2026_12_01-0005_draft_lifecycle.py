"""Draft lifecycle: governed eval sets, offline evaluations, offline and shadow criteria

- eval_sets (versioned by name) and eval_cases (lineage: why, source, reviewer,
  supports, refresh_by; prompts only as a store reference and a sha256);
- offline_evaluations of a pair version on an eval set (acceptance per position,
  mean acceptance length, expected speedup per depth, perplexity, slices, the
  stale cases it ran, the training set the draft saw);
- threshold_sets: the offline stage's criteria and the shadow share;
- segments.eval_set: the eval set a rollout's offline evaluation must use.
  (Rollout states `offline` and `shadow` fit the existing state column.)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 02:30:00
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NEW_THRESHOLDS: list[tuple[str, sa.types.TypeEngine[Any], str]] = [
    ("offline_min_mean_acceptance_length", sa.Float(), "1.5"),
    ("offline_min_expected_speedup", sa.Float(), "1.05"),
    ("offline_min_cases", sa.Integer(), "20"),
    ("offline_max_stale_fraction", sa.Float(), "0.1"),
    ("shadow_percentage", sa.Float(), "10.0"),
]


def upgrade() -> None:
    op.create_table(
        "eval_sets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("description", sa.String(length=1000), nullable=False),
        sa.Column("prompt_store", sa.String(length=1000), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_eval_sets")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_eval_sets_name_version")),
    )
    op.create_index(op.f("ix_eval_sets_name"), "eval_sets", ["name"])
    op.create_table(
        "eval_cases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("eval_set_id", sa.Integer(), nullable=False),
        sa.Column("case_key", sa.String(length=200), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("why", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("reviewer", sa.String(length=200), nullable=False),
        sa.Column("supports", sa.String(length=500), nullable=False),
        sa.Column("refresh_by", sa.Date(), nullable=False),
        sa.Column("prompt_ref", sa.String(length=500), nullable=False),
        sa.Column("prompt_sha256", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["eval_set_id"],
            ["eval_sets.id"],
            name=op.f("fk_eval_cases_eval_set_id_eval_sets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_eval_cases")),
        sa.UniqueConstraint(
            "eval_set_id", "case_key", name=op.f("uq_eval_cases_eval_set_id_case_key")
        ),
    )
    op.create_index(op.f("ix_eval_cases_eval_set_id"), "eval_cases", ["eval_set_id"])
    op.create_table(
        "offline_evaluations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("pair_version_id", sa.Integer(), nullable=False),
        sa.Column("eval_set_id", sa.Integer(), nullable=False),
        sa.Column("cases", sa.Integer(), nullable=False),
        sa.Column("drafts", sa.Integer(), nullable=False),
        sa.Column("position_acceptance", sa.JSON(), nullable=False),
        sa.Column("mean_acceptance_length", sa.Float(), nullable=False),
        sa.Column("cost_ratio", sa.Float(), nullable=False),
        sa.Column("expected_speedup", sa.JSON(), nullable=False),
        sa.Column("draft_perplexity", sa.Float(), nullable=True),
        sa.Column("slices", sa.JSON(), nullable=False),
        sa.Column("stale_case_keys", sa.JSON(), nullable=False),
        sa.Column("training_set", sa.String(length=500), nullable=True),
        sa.Column("engine_version", sa.String(length=50), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["eval_set_id"],
            ["eval_sets.id"],
            name=op.f("fk_offline_evaluations_eval_set_id_eval_sets"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["pair_version_id"],
            ["pair_versions.id"],
            name=op.f("fk_offline_evaluations_pair_version_id_pair_versions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_offline_evaluations")),
    )
    op.create_index(
        op.f("ix_offline_evaluations_eval_set_id"), "offline_evaluations", ["eval_set_id"]
    )
    op.create_index(
        op.f("ix_offline_evaluations_pair_version_id"), "offline_evaluations", ["pair_version_id"]
    )
    with op.batch_alter_table("threshold_sets") as batch:
        for name, type_, default in _NEW_THRESHOLDS:
            batch.add_column(sa.Column(name, type_, nullable=False, server_default=default))
    # NOTE: the server defaults only fill existing rows; the ORM supplies values.
    with op.batch_alter_table("threshold_sets") as batch:
        for name, _type, _default in _NEW_THRESHOLDS:
            batch.alter_column(name, server_default=None)
    with op.batch_alter_table("segments") as batch:
        batch.add_column(sa.Column("eval_set", sa.String(length=100), nullable=True))


def downgrade() -> None:
    op.execute(
        "UPDATE rollouts SET state = 'draft', percentage = 0 WHERE state IN ('offline', 'shadow')"
    )
    with op.batch_alter_table("segments") as batch:
        batch.drop_column("eval_set")
    with op.batch_alter_table("threshold_sets") as batch:
        for name, _type, _default in reversed(_NEW_THRESHOLDS):
            batch.drop_column(name)
    op.drop_index(op.f("ix_offline_evaluations_pair_version_id"), table_name="offline_evaluations")
    op.drop_index(op.f("ix_offline_evaluations_eval_set_id"), table_name="offline_evaluations")
    op.drop_table("offline_evaluations")
    op.drop_index(op.f("ix_eval_cases_eval_set_id"), table_name="eval_cases")
    op.drop_table("eval_cases")
    op.drop_index(op.f("ix_eval_sets_name"), table_name="eval_sets")
    op.drop_table("eval_sets")
