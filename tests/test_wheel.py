"""The wheel installs only what users import, under the project's own names; bench
and demo say they need a checkout; the installed wheel migrates with the
migrations it carries (control/migrations), from outside any checkout."""

import os
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory

from control.cli import Group, _installed, needs_checkout
from control.models import Base

ROOT = Path(__file__).resolve().parent.parent
HEAD = ScriptDirectory.from_config(Config(str(ROOT / "alembic.ini"))).get_current_head()
USER_PACKAGES = {"specwire", "gateway", "control", "engine"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Offline and without build isolation: the venv's setuptools, a few seconds.
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(out), str(ROOT)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    (found,) = out.glob("specroute-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel unpacked by pip into a bare directory (its dependencies are the venv's)."""
    site = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
         "--target", str(site), str(wheel)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return site


def test_the_wheel_holds_only_the_project_packages(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == USER_PACKAGES, tops
    shipped = {p.relative_to(ROOT / "migrations").as_posix() for p in ROOT.glob("migrations/**/*")}
    carried = {n.removeprefix("control/migrations/") for n in names}
    expected = {p for p in shipped if p.endswith((".py", ".mako"))}
    assert expected and expected <= carried, expected - carried
    assert not any("__pycache__" in n for n in names)


def test_the_installed_wheel_migrates_from_outside_a_checkout(
    installed: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(installed), "SPECROUTE_DATA_DIR": str(tmp_path)}
    locate = "from control.migrate import migrations_dir; print(migrations_dir())"
    where = subprocess.run(
        [sys.executable, "-c", locate],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert Path(where.stdout.strip()) == installed / "control/migrations"
    db = tmp_path / "control.db"
    migrated = subprocess.run(
        [str(installed / "bin/specroute"), "control", "migrate", "--database-url", f"sqlite:///{db}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout.strip() == f"database at revision {HEAD}"
    with sqlite3.connect(db) as conn:
        (revision,) = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert revision == HEAD
    assert tables == {*Base.metadata.tables, "alembic_version"}, tables


def test_a_group_left_out_of_the_wheel_says_it_needs_a_checkout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert not _installed(Group("not_a_package.cli", "app"))
    assert _installed(Group("bench.cli", "app"))  # here, in the checkout
    command = needs_checkout("bench")
    exit_code = command.main(["streams", "--requests", "8"], standalone_mode=False)
    assert exit_code == 2
    err = capsys.readouterr().err
    assert "needs a checkout" in err and "PYTHONPATH=." in err
