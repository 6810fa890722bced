"""Alembic, configured in code, so the CLI, the tests and the server all migrate the
same way from a database URL. The repository root's alembic.ini points the
`alembic` command at the same migrations/ (URL from -x url=... or the settings).

The scripts live in migrations/ at the repository root; the wheel carries that
folder as control/migrations (setup.py), so no generic top-level `migrations`
lands in site-packages. `migrations_dir()` finds either."""

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection

CONTROL_DIR = Path(__file__).resolve().parent


def migrations_dir() -> Path:
    """control/migrations in an installed wheel, else migrations/ of the checkout.

    NOTE: only a checkout (alembic.ini beside control/) has its migrations/ read:
    installed, the folder beside control/ is site-packages, where a `migrations`
    is some other project's."""
    packaged = CONTROL_DIR / "migrations"
    if (packaged / "env.py").is_file():
        return packaged
    checkout = CONTROL_DIR.parent
    if (checkout / "alembic.ini").is_file() and (checkout / "migrations/env.py").is_file():
        return checkout / "migrations"
    raise RuntimeError(f"no Alembic migrations: neither {packaged} nor a checkout's migrations/")


def alembic_config(url: str | None = None, connection: Connection | None = None) -> Config:
    """A Config pointing at `migrations_dir()`; the URL travels in `attributes` rather than
    the ini options so that `%` in passwords needs no configparser escaping."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
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
