"""The Alembic migrations build exactly the schema the ORM models describe."""

from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from control.db import make_engine
from control.migrate import alembic_config, current_revision, downgrade, upgrade
from control.models import Base
from tests.control.db.migration_checks import (
    assert_enrolments_bound,
    schema_diff,
    seed_pools_and_agent_tokens,
)


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
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
    assert schema_diff(empty_db_url) == []


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
