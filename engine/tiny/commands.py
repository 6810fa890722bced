"""Commands of engine.tiny."""

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to `specroute engine`."""
