"""initial schema

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-29 12:09:34.768890
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "admin_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("extra", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_admin_tokens")),
        sa.UniqueConstraint("name", name=op.f("uq_admin_tokens_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_admin_tokens_token_hash")),
    )
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=100), nullable=False),
        sa.Column("entity_type", sa.String(length=50), nullable=False),
        sa.Column("entity_id", sa.String(length=100), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.Column("reason", sa.String(length=1000), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_events_action"), ["action"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_events_actor"), ["actor"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_audit_events_created_at"), ["created_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_audit_events_entity_id"), ["entity_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_audit_events_entity_type"), ["entity_type"], unique=False
        )

    op.create_table(
        "idempotency_records",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("method", sa.String(length=10), nullable=False),
        sa.Column("path", sa.String(length=500), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("response_body", sa.JSON(), nullable=False),
        sa.Column("response_headers", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_idempotency_records")),
        sa.UniqueConstraint("actor", "key", name=op.f("uq_idempotency_records_actor_key")),
    )
    op.create_table(
        "pairs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.String(length=500), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pairs")),
        sa.UniqueConstraint("name", name=op.f("uq_pairs_name")),
    )
    op.create_table(
        "segments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("description", sa.String(length=500), nullable=False),
        sa.Column("selector", sa.JSON(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_segments")),
        sa.UniqueConstraint("name", name=op.f("uq_segments_name")),
    )
    op.create_table(
        "snapshot_state",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_snapshot_state")),
    )
    op.create_table(
        "telemetry_batches",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gateway_id", sa.String(length=200), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("windows", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_telemetry_batches")),
        sa.UniqueConstraint(
            "gateway_id", "window_start", name=op.f("uq_telemetry_batches_gateway_id_window_start")
        ),
    )
    op.create_table(
        "tenants",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("allowed_models", sa.JSON(), nullable=True),
        sa.Column("override_allowed", sa.Boolean(), nullable=False),
        sa.Column("weighted_tokens_per_minute", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
        sa.UniqueConstraint("name", name=op.f("uq_tenants_name")),
    )
    op.create_table(
        "threshold_sets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("min_acceptance_rate", sa.Float(), nullable=False),
        sa.Column("min_mean_acceptance_length", sa.Float(), nullable=False),
        sa.Column("min_speedup", sa.Float(), nullable=False),
        sa.Column("max_kv_cache_usage", sa.Float(), nullable=False),
        sa.Column("min_samples", sa.Integer(), nullable=False),
        sa.Column("stage_dwell_seconds", sa.Integer(), nullable=False),
        sa.Column("guard_dwell_seconds", sa.Integer(), nullable=False),
        sa.Column("probation_percentage", sa.Float(), nullable=False),
        sa.Column("cooldown_seconds", sa.Integer(), nullable=False),
        sa.Column("memory_pressure_beats", sa.Integer(), nullable=False),
        sa.Column("draft_unavailable_seconds", sa.Integer(), nullable=False),
        sa.Column("max_inconclusive_rounds", sa.Integer(), nullable=False),
        sa.Column("error_rate_alpha", sa.Float(), nullable=False),
        sa.Column("sprt_alpha", sa.Float(), nullable=False),
        sa.Column("sprt_beta", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_threshold_sets")),
        sa.UniqueConstraint("name", "version", name=op.f("uq_threshold_sets_name_version")),
    )
    with op.batch_alter_table("threshold_sets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_threshold_sets_name"), ["name"], unique=False)

    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_api_keys_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_tenant_id"), ["tenant_id"], unique=False)

    op.create_table(
        "pair_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("pair_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("target_ref", sa.String(length=1000), nullable=False),
        sa.Column("target_digest", sa.String(length=64), nullable=False),
        sa.Column("draft_ref", sa.String(length=1000), nullable=True),
        sa.Column("draft_digest", sa.String(length=64), nullable=True),
        sa.Column("num_speculative_tokens", sa.Integer(), nullable=False),
        sa.Column("draft_sample_method", sa.String(length=32), nullable=False),
        sa.Column("tokenizer_hash", sa.String(length=64), nullable=False),
        sa.Column("chat_template_hash", sa.String(length=64), nullable=True),
        sa.Column("adapter_id", sa.String(length=200), nullable=True),
        sa.Column("engine_version", sa.String(length=50), nullable=False),
        sa.Column("capabilities", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["pair_id"],
            ["pairs.id"],
            name=op.f("fk_pair_versions_pair_id_pairs"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pair_versions")),
        sa.UniqueConstraint("pair_id", "version", name=op.f("uq_pair_versions_pair_id_version")),
    )
    with op.batch_alter_table("pair_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pair_versions_pair_id"), ["pair_id"], unique=False)

    op.create_table(
        "pools",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("served_model_name", sa.String(length=200), nullable=False),
        sa.Column("target_ref", sa.String(length=1000), nullable=False),
        sa.Column("pair_version_id", sa.Integer(), nullable=True),
        sa.Column("engine_args", sa.JSON(), nullable=False),
        sa.Column("desired_workers", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["pair_version_id"],
            ["pair_versions.id"],
            name=op.f("fk_pools_pair_version_id_pair_versions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pools")),
        sa.UniqueConstraint("name", name=op.f("uq_pools_name")),
    )
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_pools_pair_version_id"), ["pair_version_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_pools_served_model_name"), ["served_model_name"], unique=False
        )

    op.create_table(
        "rollouts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("segment_id", sa.Integer(), nullable=False),
        sa.Column("pair_version_id", sa.Integer(), nullable=False),
        sa.Column("spec_pool_id", sa.Integer(), nullable=False),
        sa.Column("baseline_pool_id", sa.Integer(), nullable=False),
        sa.Column("threshold_set_id", sa.Integer(), nullable=False),
        sa.Column("stages", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("paused_from", sa.String(length=16), nullable=True),
        sa.Column("percentage", sa.Float(), nullable=False),
        sa.Column("cohort_salt", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("state_entered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("inconclusive_rounds", sa.Integer(), nullable=False),
        sa.Column("disable_count", sa.Integer(), nullable=False),
        sa.Column("disabled_reason", sa.String(length=100), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["baseline_pool_id"],
            ["pools.id"],
            name=op.f("fk_rollouts_baseline_pool_id_pools"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["pair_version_id"],
            ["pair_versions.id"],
            name=op.f("fk_rollouts_pair_version_id_pair_versions"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["segment_id"],
            ["segments.id"],
            name=op.f("fk_rollouts_segment_id_segments"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["spec_pool_id"],
            ["pools.id"],
            name=op.f("fk_rollouts_spec_pool_id_pools"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["threshold_set_id"],
            ["threshold_sets.id"],
            name=op.f("fk_rollouts_threshold_set_id_threshold_sets"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rollouts")),
        sa.UniqueConstraint("name", name=op.f("uq_rollouts_name")),
    )
    with op.batch_alter_table("rollouts", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_rollouts_pair_version_id"), ["pair_version_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_rollouts_segment_id"), ["segment_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_rollouts_state"), ["state"], unique=False)

    op.create_table(
        "workers",
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("pool_id", sa.Integer(), nullable=False),
        sa.Column("endpoint_url", sa.String(length=500), nullable=False),
        sa.Column("healthy", sa.Boolean(), nullable=False),
        sa.Column("draft_loaded", sa.Boolean(), nullable=False),
        sa.Column("kv_cache_usage", sa.Float(), nullable=False),
        sa.Column("running", sa.Integer(), nullable=False),
        sa.Column("waiting", sa.Integer(), nullable=False),
        sa.Column("spec_counters", sa.JSON(), nullable=True),
        sa.Column("process_memory_bytes", sa.Integer(), nullable=False),
        sa.Column("gpu_memory_bytes", sa.Integer(), nullable=True),
        sa.Column("engine_version", sa.String(length=50), nullable=True),
        sa.Column("high_memory_beats", sa.Integer(), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["pool_id"], ["pools.id"], name=op.f("fk_workers_pool_id_pools"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
    )
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_workers_pool_id"), ["pool_id"], unique=False)

    op.create_table(
        "decisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rollout_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=False),
        sa.Column("to_state", sa.String(length=16), nullable=False),
        sa.Column("from_percentage", sa.Double(), nullable=False),
        sa.Column("to_percentage", sa.Double(), nullable=False),
        sa.Column("rollout_version", sa.Integer(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("threshold_set_id", sa.Integer(), nullable=True),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("task_id", sa.String(length=200), nullable=True),
        sa.Column("record_markdown", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["rollout_id"],
            ["rollouts.id"],
            name=op.f("fk_decisions_rollout_id_rollouts"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["threshold_set_id"],
            ["threshold_sets.id"],
            name=op.f("fk_decisions_threshold_set_id_threshold_sets"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_decisions")),
    )
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_decisions_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_decisions_kind"), ["kind"], unique=False)
        batch_op.create_index(batch_op.f("ix_decisions_rollout_id"), ["rollout_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_decisions_task_id"), ["task_id"], unique=False)

    op.create_table(
        "depth_recommendations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rollout_id", sa.Integer(), nullable=False),
        sa.Column("pair_version_id", sa.Integer(), nullable=False),
        sa.Column("current_k", sa.Integer(), nullable=False),
        sa.Column("recommended_k", sa.Integer(), nullable=False),
        sa.Column("expected_speedup_current", sa.Double(), nullable=False),
        sa.Column("expected_speedup_recommended", sa.Double(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("task_id", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["pair_version_id"],
            ["pair_versions.id"],
            name=op.f("fk_depth_recommendations_pair_version_id_pair_versions"),
        ),
        sa.ForeignKeyConstraint(
            ["rollout_id"],
            ["rollouts.id"],
            name=op.f("fk_depth_recommendations_rollout_id_rollouts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_depth_recommendations")),
    )
    with op.batch_alter_table("depth_recommendations", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_depth_recommendations_rollout_id"), ["rollout_id"], unique=False
        )

    op.create_table(
        "telemetry_windows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=200), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("window_seconds", sa.Integer(), nullable=False),
        sa.Column("segment_id", sa.Integer(), nullable=False),
        sa.Column("arm", sa.String(length=16), nullable=False),
        sa.Column("pair_version_id", sa.Integer(), nullable=False),
        sa.Column("rollout_id", sa.Integer(), nullable=True),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("errors", sa.Integer(), nullable=False),
        sa.Column("cancellations", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("drafts", sa.Integer(), nullable=False),
        sa.Column("drafted_tokens", sa.Integer(), nullable=False),
        sa.Column("accepted_tokens", sa.Integer(), nullable=False),
        sa.Column("accepted_per_position", sa.JSON(), nullable=False),
        sa.Column("histograms", sa.JSON(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["rollout_id"],
            ["rollouts.id"],
            name=op.f("fk_telemetry_windows_rollout_id_rollouts"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_telemetry_windows")),
        sa.UniqueConstraint(
            "source",
            "window_start",
            "segment_id",
            "arm",
            "pair_version_id",
            name=op.f("uq_telemetry_windows_source_window_start_segment_id_arm_pair_version_id"),
        ),
    )
    with op.batch_alter_table("telemetry_windows", schema=None) as batch_op:
        batch_op.create_index(
            "ix_telemetry_windows_segment_window", ["segment_id", "window_start"], unique=False
        )


def downgrade() -> None:

    with op.batch_alter_table("telemetry_windows", schema=None) as batch_op:
        batch_op.drop_index("ix_telemetry_windows_segment_window")

    op.drop_table("telemetry_windows")
    with op.batch_alter_table("depth_recommendations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_depth_recommendations_rollout_id"))

    op.drop_table("depth_recommendations")
    with op.batch_alter_table("decisions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_decisions_task_id"))
        batch_op.drop_index(batch_op.f("ix_decisions_rollout_id"))
        batch_op.drop_index(batch_op.f("ix_decisions_kind"))
        batch_op.drop_index(batch_op.f("ix_decisions_created_at"))

    op.drop_table("decisions")
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workers_pool_id"))

    op.drop_table("workers")
    with op.batch_alter_table("rollouts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_rollouts_state"))
        batch_op.drop_index(batch_op.f("ix_rollouts_segment_id"))
        batch_op.drop_index(batch_op.f("ix_rollouts_pair_version_id"))

    op.drop_table("rollouts")
    with op.batch_alter_table("pools", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pools_served_model_name"))
        batch_op.drop_index(batch_op.f("ix_pools_pair_version_id"))

    op.drop_table("pools")
    with op.batch_alter_table("pair_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pair_versions_pair_id"))

    op.drop_table("pair_versions")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_keys_tenant_id"))

    op.drop_table("api_keys")
    with op.batch_alter_table("threshold_sets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_threshold_sets_name"))

    op.drop_table("threshold_sets")
    op.drop_table("tenants")
    op.drop_table("telemetry_batches")
    op.drop_table("snapshot_state")
    op.drop_table("segments")
    op.drop_table("pairs")
    op.drop_table("idempotency_records")
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_events_entity_type"))
        batch_op.drop_index(batch_op.f("ix_audit_events_entity_id"))
        batch_op.drop_index(batch_op.f("ix_audit_events_created_at"))
        batch_op.drop_index(batch_op.f("ix_audit_events_actor"))
        batch_op.drop_index(batch_op.f("ix_audit_events_action"))

    op.drop_table("audit_events")
    op.drop_table("admin_tokens")
