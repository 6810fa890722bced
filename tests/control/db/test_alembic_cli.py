"""`alembic` from the repository root, as a user runs it: the shipped alembic.ini,
the URL from -x or SPECROUTE_DATABASE_URL, and offline `--sql` scripts for
PostgreSQL that, run by PostgreSQL, build exactly the schema the models describe."""

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory

from control.migrate import current_revision, upgrade
from tests.control.db.migration_checks import (
    assert_enrolments_bound,
    schema_diff,
    seed_pools_and_agent_tokens,
)
from tests.fixtures.db import _create_postgres_database, _drop_postgres_database
from tests.fixtures.services import require_postgres

ROOT = Path(__file__).resolve().parents[3]
HEAD = ScriptDirectory.from_config(Config(str(ROOT / "alembic.ini"))).get_current_head()


def alembic(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SPECROUTE_")}
    environ["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "alembic", *args],
        cwd=ROOT,
        env=environ | (env or {}),
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def postgres_url() -> Iterator[str]:
    admin_url = require_postgres()
    name, url = _create_postgres_database(admin_url)
    try:
        yield url
    finally:
        _drop_postgres_database(admin_url, name)


def run_script(url: str, sql: str) -> None:
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(sql.encode())


def test_heads_history_and_current_work_from_the_root(tmp_path: Path) -> None:
    assert HEAD is not None
    heads = alembic("heads")
    assert heads.returncode == 0, heads.stderr
    assert heads.stdout.strip() == f"{HEAD} (head)"
    history = alembic("history")
    assert history.returncode == 0, history.stderr
    assert "<base> -> 0001, initial schema" in history.stdout
    assert f"-> {HEAD} (head)" in history.stdout

    by_x = f"sqlite:///{tmp_path / 'x.db'}"
    upgraded = alembic("-x", f"url={by_x}", "upgrade", "head")
    assert upgraded.returncode == 0, upgraded.stderr
    assert current_revision(by_x) == HEAD
    assert alembic("-x", f"url={by_x}", "current").stdout.strip() == f"{HEAD} (head)"

    # Without -x: the control plane's own settings decide, as for `control serve`.
    by_env = f"sqlite:///{tmp_path / 'env.db'}"
    upgrade(by_env, "0012")
    current = alembic("current", env={"SPECROUTE_DATABASE_URL": by_env})
    assert current.returncode == 0, current.stderr
    assert current.stdout.strip() == "0012"
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    made = alembic("upgrade", "head", env={"SPECROUTE_DATA_DIR": str(data_dir)})
    assert made.returncode == 0, made.stderr
    assert current_revision(f"sqlite:///{data_dir / 'control.db'}") == HEAD


def test_offline_sql_builds_the_models_schema_on_postgresql(postgres_url: str) -> None:
    # No connection is made: the host need not exist.
    script = alembic(
        "-x", "url=postgresql+psycopg://nobody@nowhere/none", "upgrade", "head", "--sql"
    )
    assert script.returncode == 0, script.stderr
    assert script.stdout.startswith("BEGIN;") and "CREATE TABLE rollouts" in script.stdout
    run_script(postgres_url, script.stdout)
    assert current_revision(postgres_url) == HEAD
    assert schema_diff(postgres_url) == []


def test_offline_pool_uid_step_binds_enrolments_in_sql(postgres_url: str) -> None:
    upgrade(postgres_url, "0012")
    seed_pools_and_agent_tokens(postgres_url)
    with psycopg.connect(postgres_url.replace("+psycopg", "")) as conn:
        existing = {
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        }
    script = alembic("-x", f"url={postgres_url}", "upgrade", "0012:head", "--sql")
    assert script.returncode == 0, script.stderr
    # The script starts from 0012's schema: later migrations may add tables, but none
    # that 0012 already has (alembic_version included) is created again.
    created = set(re.findall(r"CREATE TABLE (\w+)", script.stdout))
    assert "pools" in existing and "alembic_version" in existing
    assert not created & existing, created & existing
    run_script(postgres_url, script.stdout)
    assert current_revision(postgres_url) == HEAD
    assert_enrolments_bound(postgres_url)


def test_offline_sql_for_sqlite_is_refused_in_one_line(tmp_path: Path) -> None:
    refused = alembic("-x", f"url=sqlite:///{tmp_path / 'c.db'}", "upgrade", "head", "--sql")
    assert refused.returncode == 1
    assert "offline (--sql) migrations are for PostgreSQL" in refused.stderr
    assert "Traceback" not in refused.stderr
