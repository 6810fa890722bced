"""The `specroute` command.

Sub-command groups register through the `specroute.commands` entry-point group
(see pyproject.toml), so this package does not import gateway or engine code:
each group lives with the package it drives and is loaded only by name.
"""

from importlib.metadata import entry_points

import typer

app = typer.Typer(help="specroute: policy-driven speculative decoding.", no_args_is_help=True)


def _register_groups() -> None:
    for ep in sorted(entry_points(group="specroute.commands"), key=lambda e: e.name):
        group = ep.load()
        if isinstance(group, typer.Typer):
            app.add_typer(group, name=ep.name)
        else:
            app.command(name=ep.name)(group)


_register_groups()
