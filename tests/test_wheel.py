"""The wheel installs only what users import; bench and demo say they need a checkout."""

import subprocess
import sys
import zipfile
from pathlib import Path

from click.testing import CliRunner

from control.cli import Group, _installed, needs_checkout

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_holds_only_the_project_packages(tmp_path: Path) -> None:
    # Offline and without build isolation: the venv's setuptools, a few seconds.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("specroute-*.whl")
    names = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    tops = {n for n in names if not n.endswith(".dist-info")}
    assert tops == {"specwire", "gateway", "control", "engine", "migrations", "dashboards"}, names


def test_a_group_left_out_of_the_wheel_says_it_needs_a_checkout() -> None:
    assert not _installed(Group("not_a_package.cli", "app"))
    assert _installed(Group("bench.cli", "app"))  # here, in the checkout
    result = CliRunner().invoke(needs_checkout("bench"), ["streams", "--requests", "8"])
    assert result.exit_code == 2
    assert "needs a checkout" in result.output and "PYTHONPATH=." in result.output
