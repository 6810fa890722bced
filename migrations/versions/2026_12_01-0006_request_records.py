"""Per-request records (no text) and each tenant's record sampling rate

- request_records: one row per sampled gateway request, shipped in telemetry
  batches and deleted by the retention job; no foreign keys (a record outlives
  what it names).
- tenants.request_sample_rate: the share of the tenant's requests recorded.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 02:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "request_records",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=128), nullable=False),
        sa.Column("gateway_id", sa.String(length=200), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("tenant", sa.String(length=100), nullable=False),
        sa.Column("endpoint", sa.String(length=16), nullable=False),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.Column("model", sa.String(length=256), nullable=False),
        sa.Column("adapter", sa.String(length=256), nullable=True),
        sa.Column("segment_id", sa.Integer(), nullable=True),
        sa.Column("segment", sa.String(length=200), nullable=True),
        sa.Column("rollout_id", sa.Integer(), nullable=True),
        sa.Column("rollout_version", sa.Integer(), nullable=True),
        sa.Column("pair_version_id", sa.Integer(), nullable=True),
        sa.Column("pair", sa.String(length=200), nullable=True),
        sa.Column("arm", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column("pool_id", sa.Integer(), nullable=True),
        sa.Column("worker_id", sa.String(length=200), nullable=True),
        sa.Column("engine_version", sa.String(length=50), nullable=True),
        sa.Column("sampling", sa.JSON(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("drafts", sa.Integer(), nullable=False),
        sa.Column("drafted_tokens", sa.Integer(), nullable=False),
        sa.Column("accepted_tokens", sa.Integer(), nullable=False),
        sa.Column("accepted_per_position", sa.JSON(), nullable=False),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("tpot_ms", sa.Float(), nullable=True),
        sa.Column("e2e_ms", sa.Float(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("http_status", sa.Integer(), nullable=False),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_request_records")),
    )
    with op.batch_alter_table("request_records") as batch:
        batch.create_index("ix_request_records_request_id", ["request_id"])
        batch.create_index("ix_request_records_received_at", ["received_at"])
        batch.create_index("ix_request_records_tenant_received", ["tenant_id", "received_at"])
        batch.create_index("ix_request_records_segment_received", ["segment_id", "received_at"])
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(
            sa.Column("request_sample_rate", sa.Float(), nullable=False, server_default="1.0")
        )
    # NOTE: the server default only fills existing rows; the ORM supplies values.
    with op.batch_alter_table("tenants") as batch:
        batch.alter_column("request_sample_rate", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("request_sample_rate")
    op.drop_table("request_records")
