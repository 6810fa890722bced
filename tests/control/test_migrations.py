"""The Alembic migrations build exactly the schema the ORM models describe."""

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from control.db import make_engine
from control.migrate import current_revision, downgrade, upgrade
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
