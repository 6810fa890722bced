"""Alembic, configured in code, so the CLI, the tests and the server all migrate the
same way from a database URL. The repository root's alembic.ini points the
`alembic` command at the same migrations/ (URL from -x url=... or the settings)."""

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection

import migrations

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent


def alembic_config(url: str | None = None, connection: Connection | None = None) -> Config:
    """A Config pointing at migrations/; the URL travels in `attributes` rather than
    the ini options so that `%` in passwords needs no configparser escaping."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["url"] = url
    config.attributes["connection"] = connection
    return config


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    from control.db import make_engine

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
