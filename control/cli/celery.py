"""`specroute worker` and `specroute beat`."""

import typer


def worker() -> None:
    """Start a Celery worker for the control plane's jobs."""
    raise typer.Exit(code=2)


def beat() -> None:
    """Start Celery beat, which schedules the control plane's jobs."""
    raise typer.Exit(code=2)
