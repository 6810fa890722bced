"""The build step pyproject.toml cannot say: repository folders the wheel carries
under the project's own packages.

migrations/ stays at the repository root, where alembic.ini and `alembic` from a
checkout read it; installed as a top-level `migrations` it would collide with any
other project's in a shared site-packages. So build_py copies it into the wheel as
control/migrations, where control.migrate.migrations_dir() looks first. Everything
else (metadata, packages, package data) is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# A repository folder -> where the wheel holds it (a path under a shipped package).
CARRIED = {"migrations": "control/migrations"}


class BuildPy(build_py):
    def run(self) -> None:
        # NOTE: setuptools never empties build/lib, and the wheel takes all of it: a
        # package left from an earlier build (a top-level migrations/) would ship again.
        shutil.rmtree(self.build_lib, ignore_errors=True)
        super().run()
        # An editable install keeps reading the checkout's folders.
        if self.editable_mode:
            return
        for source, target in CARRIED.items():
            dest = Path(self.build_lib) / target
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(
                ROOT / source, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )


if __name__ == "__main__":
    setup(cmdclass={"build_py": BuildPy})
