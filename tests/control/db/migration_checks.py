"""Checks on a migrated database, shared by the migration and the alembic CLI tests:
the schema's difference from the models, and the data that migration 0013 binds."""

import json
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from control.db import make_engine
from control.models import Base


def schema_diff(url: str) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def seed_pools_and_agent_tokens(url: str) -> None:
    """At 0012: pools 1 and 2; agent tokens for pool 1 and for a pool 9 that is gone,
    and an admin token."""
    now = datetime.now(UTC)
    pools = sa.table(
        "pools",
        *(sa.column(c) for c in ("id", "name", "served_model_name", "target_ref")),
        sa.column("engine_args", sa.JSON()),
        *(sa.column(c) for c in ("desired_workers", "created_at", "updated_at")),
    )
    tokens = sa.table(
        "admin_tokens",
        *(sa.column(c) for c in ("id", "name", "prefix", "token_hash", "created_at")),
        sa.column("scopes", sa.JSON()),
        sa.column("extra", sa.JSON()),
    )
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for pool_id in (1, 2):
                conn.execute(
                    pools.insert().values(
                        id=pool_id,
                        name=f"p{pool_id}",
                        served_model_name="tiny",
                        target_ref="/m",
                        engine_args={},
                        desired_workers=1,
                        created_at=now,
                        updated_at=now,
                    )
                )
            for token_id, scopes, extra in (
                (1, ["internal:agent"], {"pool_id": 1, "allowed_endpoints": []}),
                (2, ["internal:agent"], {"pool_id": 9, "allowed_endpoints": []}),
                (3, ["admin:read"], {}),
            ):
                conn.execute(
                    tokens.insert().values(
                        id=token_id,
                        name=f"t{token_id}",
                        prefix="x",
                        token_hash=str(token_id) * 64,
                        created_at=now,
                        scopes=scopes,
                        extra=extra,
                    )
                )
    finally:
        engine.dispose()


def assert_enrolments_bound(url: str) -> None:
    """After 0013: distinct 32-character uids, pool 1's enrolment bound to its uid,
    the orphan revoked, the admin token untouched, the schema the models'."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            uids: dict[int, str] = dict(conn.execute(sa.text("SELECT id, uid FROM pools")).all())
            rows = conn.execute(
                sa.text("SELECT id, extra, revoked_at FROM admin_tokens ORDER BY id")
            ).all()
    finally:
        engine.dispose()
    assert len(set(uids.values())) == 2 and all(len(uid) == 32 for uid in uids.values())
    extras = {row[0]: row[1] if isinstance(row[1], dict) else json.loads(row[1]) for row in rows}
    revoked = {row[0]: row[2] is not None for row in rows}
    assert extras[1] == {"pool_id": 1, "allowed_endpoints": [], "pool_uid": uids[1]}
    assert revoked == {1: False, 2: True, 3: False}
    assert schema_diff(url) == []
