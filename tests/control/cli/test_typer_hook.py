"""The CLI leans on typer internals (control/cli/light_params.py: the private
coercion hook; control/cli/__init__.py: the vendored click in `typer._click`).
pyproject.toml pins typer to the minor range they were tested with; these tests
fail, saying what changed, when the installed typer is outside it or the hook is
not what light_params expects (the CLI itself would keep working, slower)."""

import re
import tomllib
from enum import StrEnum
from pathlib import Path

import pytest
import typer
from typer._click.exceptions import BadParameter
from typer.main import get_command

from control.cli import light_params
from control.cli.light_params import lighten

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def test_installed_typer_is_inside_the_pinned_range() -> None:
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    pin = next(d for d in deps if d.startswith("typer"))
    found = re.fullmatch(r"typer>=([\d.]+),<([\d.]+)", pin)
    assert found, f"typer must be pinned to a tested range (>=X.Y.Z,<X.Y+1), got {pin!r}"
    low, high = (_version(v) for v in found.groups())
    assert low <= _version(typer.__version__) < high, (typer.__version__, pin)


def test_light_params_finds_typers_coercion_hook() -> None:
    assert light_params.PROBLEM is None, (
        f"typer {typer.__version__} changed the private hook control/cli/light_params.py "
        f"uses ({light_params.PROBLEM}); fix light_params (and the pin) before widening it"
    )


class Colour(StrEnum):
    red = "red"
    blue = "blue"


def test_lightened_parameters_convert_as_typer_would() -> None:
    """str, bool and Enum values go through light_params' converter, any other kind
    through typer's pydantic adapter, and typer keeps the converter light_params set."""
    app = typer.Typer(add_completion=False)
    seen: dict[str, object] = {}

    @app.command()
    def go(
        name: str = typer.Option("x"),
        loud: bool = typer.Option(False),
        colour: Colour = typer.Option(Colour.red),
        count: int = typer.Option(1),
    ) -> None:
        seen.update(name=name, loud=loud, colour=colour, count=count)

    command = lighten(get_command(app))
    kinds = {p.name: type(getattr(p, "_runtime_param", None)).__name__ for p in command.params}
    assert kinds == {"name": "_Light", "loud": "_Light", "colour": "_Light", "count": "NoneType"}

    command.main(
        ["--name", "n", "--loud", "--colour", "blue", "--count", "3"], standalone_mode=False
    )
    assert seen == {"name": "n", "loud": True, "colour": Colour.blue, "count": 3}
    after = {p.name: type(getattr(p, "_runtime_param", None)).__name__ for p in command.params}
    assert after["name"] == after["colour"] == "_Light"  # not replaced by typer's own
    assert after["count"] == "AdapterRuntimeParam"  # built by typer on first use
    with pytest.raises(BadParameter, match=r"^Value error, 'green' is not one of 'red', 'blue'\.$"):
        command.main(["--colour", "green"], standalone_mode=False)
