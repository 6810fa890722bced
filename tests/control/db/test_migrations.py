"""The Alembic migrations build exactly the schema the ORM models describe."""

import json
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from control.db import make_engine
from control.migrate import alembic_config, current_revision, downgrade, upgrade
from control.models import Base


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _diff(url: str) -> list[object]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            return list(compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade_leaves_models_and_schema_equal(empty_db_url: str) -> None:
    model_tables = set(Base.metadata.tables)

    upgrade(empty_db_url)
    assert model_tables <= _tables(empty_db_url)
    head = current_revision(empty_db_url)
    assert head is not None

    downgrade(empty_db_url)
    assert _tables(empty_db_url) & model_tables == set()
    assert current_revision(empty_db_url) is None

    upgrade(empty_db_url)
    assert current_revision(empty_db_url) == head
    assert _diff(empty_db_url) == []


def test_session_fixture_sees_the_migrated_schema(session: object, db_url: str) -> None:
    assert set(Base.metadata.tables) <= _tables(db_url)


def test_pool_uid_migration_binds_existing_enrolments_and_revokes_orphans(
    empty_db_url: str,
) -> None:
    """0013 on a database with data: every pool gets a uid, an agent enrolment of an
    existing pool is bound to it, one whose pool is gone is revoked."""
    downgrade(empty_db_url)  # the database is shared with the other migration tests
    upgrade(empty_db_url, "0012")
    seed_pools_and_agent_tokens(empty_db_url)
    upgrade(empty_db_url)
    assert_enrolments_bound(empty_db_url)


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
            uids = dict(conn.execute(sa.text("SELECT id, uid FROM pools")).all())
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
    assert _diff(url) == []


def test_the_migrations_form_one_chain_with_one_head() -> None:
    """Two branches landing the same revision number leave two heads: `upgrade head`
    then fails on every database. One head, and every revision has at most one child."""
    script = ScriptDirectory.from_config(alembic_config())
    assert len(script.get_heads()) == 1, script.get_heads()
    children: dict[str, int] = {}
    for rev in script.walk_revisions():
        for parent in rev._normalized_down_revisions:
            children[parent] = children.get(parent, 0) + 1
    assert all(n == 1 for n in children.values()), children
