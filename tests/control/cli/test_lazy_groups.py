"""`specroute` imports a command group only when it runs: `specroute --help` and
`specroute admin ...` never pay for the demo's plotting, the ORM or Celery."""

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("matplotlib", "openai", "sqlalchemy", "celery", "fastapi", "torch", "vllm")

PROBE = """
import json, sys
from typer.testing import CliRunner
from control.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
print(json.dumps({"code": result.exit_code, "output": result.output,
                  "modules": sorted(sys.modules)}))
"""


def _run(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return out


@pytest.mark.parametrize("args", [["--help"], ["admin", "--help"], ["admin", "status", "--help"]])
def test_help_and_admin_import_no_heavy_group(args: list[str]) -> None:
    result = _run(*args)
    assert result["code"] == 0, result["output"]
    modules = result["modules"]
    assert isinstance(modules, list)
    assert [m for m in HEAVY if m in modules] == []
    assert "demo.command" not in modules and "control.app" not in modules


@pytest.mark.parametrize("args", [["admin", "--help"], ["admin", "rollout", "wait", "--help"]])
def test_admin_help_imports_neither_the_http_client_nor_the_models(args: list[str]) -> None:
    """What keeps `admin --help` under 0.3 s (bench/cli_start.py measures it): httpx,
    rich and the contract's pydantic models load only when a command runs."""
    result = _run(*args)
    assert result["code"] == 0, result["output"]
    modules = result["modules"]
    assert isinstance(modules, list)
    loaded = [
        m
        for m in ("httpx", "rich.console", "yaml", "specwire.snapshot", "pydantic")
        if m in modules
    ]
    assert loaded == []


def test_admin_commands_load_neither_pydantic_nor_httpcore() -> None:
    """typer converts values through pydantic adapters; control.cli.light_params
    converts str, bool and Enum choices itself (a third of `admin --help`'s start)
    and leaves every other value, and every error message, to typer."""
    env = {"SPECROUTE_ADMIN_URL": "http://127.0.0.1:9", "SPECROUTE_ADMIN_TOKEN": "t"}
    status = _run("admin", "--token", "t", "status", "-o", "yaml", env=env)
    assert status["code"] == 1
    assert str(status["output"]).startswith("control plane unreachable at http://127.0.0.1:9")
    # Neither pydantic (typer's adapters) nor httpcore (control.cli.admin.transport).
    assert [m for m in ("pydantic", "httpcore") if m in status["modules"]] == []  # type: ignore[operator]
    bad_choice = _run("admin", "status", "-o", "xml", env=env)
    assert bad_choice["code"] == 2
    assert "Invalid value for '--output' / '-o': Value error, 'xml' is not one of 'table', " in (
        str(bad_choice["output"])
    )
    bad_number = _run("admin", "decision", "list", "--limit", "x", env=env)
    assert bad_number["code"] == 2
    assert "Invalid value for '--limit': Input should be a valid integer" in str(
        bad_number["output"]
    )


def test_own_groups_are_the_declared_entry_points() -> None:
    import tomllib
    from pathlib import Path

    from control.cli import OWN_GROUPS

    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    project = tomllib.loads(pyproject.read_text())["project"]
    assert project["entry-points"]["specroute.commands"] == OWN_GROUPS


def test_top_level_help_lists_every_group_with_its_own_help() -> None:
    result = _run("--help")
    output = str(result["output"])
    for name, words in {
        "admin": "Admin operations",
        "control": "migrations",
        "demo": "end-to-end demo",
        "engine": "Engine side",
        "gateway": "gateway",
        "worker": "Celery worker",
        "beat": "Celery beat",
    }.items():
        line = next((ln for ln in output.splitlines() if ln[2:].startswith(f"{name} ")), "")
        assert words in line, (name, output)


def test_a_group_loads_when_it_runs() -> None:
    result = _run("demo", "--help")
    assert result["code"] == 0, result["output"]
    assert "--data-dir" in str(result["output"])
    assert "demo.command" in result["modules"]  # type: ignore[operator]


def test_unknown_group_is_a_usage_error() -> None:
    result = _run("nope")
    assert result["code"] == 2
    assert "No such command 'nope'" in str(result["output"])
