"""pools.uid: an identity that is never reused, for agent enrolments

SQLite reuses the highest id after a delete, so an agent token enrolled for a
deleted pool took over the next pool that got the same id. Each pool now has a
random uid; enrolments name it, and control accepts an agent only while its pool
has that uid. Existing pools get a uid, existing agent enrolments get their
pool's, and enrolments of pools that no longer exist are revoked.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 00:30:00
"""

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from uuid import uuid4

import sqlalchemy as sa
from alembic import context, op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

pools = sa.table("pools", sa.column("id", sa.Integer()), sa.column("uid", sa.String(32)))
tokens = sa.table(
    "admin_tokens",
    sa.column("id", sa.Integer()),
    sa.column("scopes", sa.JSON()),
    sa.column("extra", sa.JSON()),
    sa.column("revoked_at", sa.DateTime(timezone=True)),
)


def _as_dict(value: object) -> dict[str, object]:
    if isinstance(value, str):
        value = json.loads(value)
    return dict(value) if isinstance(value, dict) else {}


def upgrade() -> None:
    with op.batch_alter_table("pools") as batch:
        batch.add_column(sa.Column("uid", sa.String(length=32), nullable=True))
    if context.is_offline_mode():
        _bind_in_sql()
    else:
        _bind_rows()
    with op.batch_alter_table("pools") as batch:
        batch.alter_column("uid", existing_type=sa.String(length=32), nullable=False)
        batch.create_unique_constraint("uq_pools_uid", ["uid"])


def _bind_in_sql() -> None:
    """PostgreSQL: md5 of random text is 32 hex characters like uuid4().hex."""
    agent = "t.scopes::jsonb @> '[\"internal:agent\"]'::jsonb AND t.revoked_at IS NULL"
    op.execute("UPDATE pools SET uid = md5(random()::text || id::text)")
    op.execute(
        "UPDATE admin_tokens AS t SET extra = (COALESCE(t.extra::jsonb, '{}'::jsonb) || "
        "jsonb_build_object('pool_uid', p.uid))::json FROM pools AS p "
        f"WHERE {agent} AND p.id::text = t.extra::jsonb ->> 'pool_id'"
    )
    op.execute(
        f"UPDATE admin_tokens AS t SET revoked_at = now() WHERE {agent} AND NOT EXISTS "
        "(SELECT 1 FROM pools AS p WHERE p.id::text = t.extra::jsonb ->> 'pool_id')"
    )


def _bind_rows() -> None:
    conn = op.get_bind()
    uids: dict[int, str] = {}
    for (pool_id,) in conn.execute(sa.select(pools.c.id)).all():
        uids[pool_id] = uuid4().hex
        conn.execute(pools.update().where(pools.c.id == pool_id).values(uid=uids[pool_id]))
    now = datetime.now(UTC)
    rows = conn.execute(
        sa.select(tokens.c.id, tokens.c.scopes, tokens.c.extra).where(tokens.c.revoked_at.is_(None))
    ).all()
    for token_id, scopes, extra in rows:
        if "internal:agent" not in (json.loads(scopes) if isinstance(scopes, str) else scopes):
            continue
        enrolment = _as_dict(extra)
        pool_id = enrolment.get("pool_id")
        update = tokens.update().where(tokens.c.id == token_id)
        if isinstance(pool_id, int) and pool_id in uids:
            conn.execute(update.values(extra={**enrolment, "pool_uid": uids[pool_id]}))
        else:
            conn.execute(update.values(revoked_at=now))


def downgrade() -> None:
    with op.batch_alter_table("pools") as batch:
        batch.drop_constraint("uq_pools_uid", type_="unique")
        batch.drop_column("uid")
