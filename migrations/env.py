"""Alembic environment, online and offline, batch mode on SQLite (ALTER TABLE
there cannot drop or change columns, so Alembic rebuilds the table).

The database URL, first found wins: the `url` attribute `control.migrate` sets,
`alembic -x url=...`, `sqlalchemy.url` in an ini file, then the control plane's
own settings (SPECROUTE_DATABASE_URL, else the SQLite file under the data dir).
Offline mode (`alembic upgrade head --sql`) writes PostgreSQL's script; SQLite's
batch rebuilds need the live table, so there it is refused with a message.
"""

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection
from sqlalchemy.pool import NullPool

from control.db import make_engine
from control.models import Base

config = context.config
target_metadata = Base.metadata

if config.config_file_name is not None and config.attributes.get("connection") is None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def database_url() -> str:
    url = config.attributes.get("url")
    if url:
        return str(url)
    url = context.get_x_argument(as_dictionary=True).get("url")
    if url:
        return url
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from control.settings import ControlSettings

    return ControlSettings().resolved_database_url()


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        compare_server_default=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection: Connection | None = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(database_url(), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


def run_migrations_offline() -> None:
    url = database_url()
    if url.startswith("sqlite"):
        raise SystemExit(
            "offline (--sql) migrations are for PostgreSQL: SQLite's batch table rebuilds "
            "need the live schema. Pass -x url=postgresql+psycopg://... (no connection is "
            "made) or run `alembic upgrade head` online."
        )
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
        compare_type=True,
        compare_server_default=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
