"""The scratch PostgreSQL database `python -m tests.hostile` runs in: fresh, then gone."""

from sqlalchemy import create_engine, text

from tests.fixtures.db import scratch_postgres_database
from tests.fixtures.services import POSTGRES_URL, require_postgres


def _databases() -> set[str]:
    engine = create_engine(POSTGRES_URL)
    with engine.connect() as conn:
        names = {row[0] for row in conn.execute(text("SELECT datname FROM pg_database"))}
    engine.dispose()
    return names


def test_each_scratch_database_is_empty_and_dropped_on_exit() -> None:
    require_postgres()
    before = _databases()
    for _ in range(2):  # a second run must not meet the first one's rows
        with scratch_postgres_database(POSTGRES_URL) as url:
            name = url.rpartition("/")[2]
            assert name not in before
            engine = create_engine(url)
            with engine.begin() as conn:
                tables = conn.execute(
                    text(
                        "SELECT count(*) FROM information_schema.tables "
                        "WHERE table_schema = 'public'"
                    )
                ).scalar_one()
                assert tables == 0
                conn.execute(text("CREATE TABLE left_behind (id integer)"))
            engine.dispose()
            assert name in _databases()
        assert name not in _databases()
