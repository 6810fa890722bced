"""`specroute demo`: the main job end to end on embedded defaults."""

import typer


def demo() -> None:
    """Run the end-to-end demo (arrives with the demo issue)."""
    typer.echo("make demo is not implemented yet", err=True)
    raise typer.Exit(code=2)
