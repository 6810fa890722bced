"""`make install` reinstalls the venv when a file the install reads is newer than
its stamp: pyproject.toml (metadata, dependencies) and setup.py (the build step)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STAMP = ".venv/.specroute-installed"


def _planned(tmp_path: Path, newer: str | None) -> str:
    """What `make -n install` would run in a copy of the checkout's build files, the
    stamp written after them and then `newer` (if any) touched past the stamp."""
    tmp_path.mkdir()
    for name in ("Makefile", "pyproject.toml", "setup.py", "MANIFEST.in"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / ".venv/bin").mkdir(parents=True)
    (tmp_path / ".venv/bin/python").touch()
    (tmp_path / STAMP).touch()
    for name in ("Makefile", "pyproject.toml", "setup.py", "MANIFEST.in", ".venv/bin/python"):
        os.utime(tmp_path / name, (1_000_000, 1_000_000))
    os.utime(tmp_path / STAMP, (2_000_000, 2_000_000))
    if newer is not None:
        os.utime(tmp_path / newer, (3_000_000, 3_000_000))
    done = subprocess.run(
        ["make", "-n", "install"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_install_reruns_when_pyproject_or_setup_py_changed(tmp_path: Path) -> None:
    assert "pip install -e" not in _planned(tmp_path / "fresh", None)
    for name in ("pyproject.toml", "setup.py"):
        assert "pip install -e" in _planned(tmp_path / name, name), name
