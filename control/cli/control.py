"""Commands: filled in by the owning package."""

import typer

app = typer.Typer(no_args_is_help=True)
