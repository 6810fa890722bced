"""`specroute worker` and `specroute beat`: a real Celery worker / beat on the
automation app, with the broker and database from `ControlSettings` (env SPECROUTE_)."""

from typing import TYPE_CHECKING

import typer

from control.settings import get_settings

if TYPE_CHECKING:
    from control.automation.celery_app import AutomationCelery


def _app() -> "AutomationCelery":
    # Imported here so other `specroute` commands do not pay for importing Celery.
    from control.automation.app import create_celery_app

    settings = get_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    return create_celery_app(settings)


def worker(
    concurrency: int = typer.Option(1, min=1, help="Worker processes (prefork pool)."),
    pool: str = typer.Option("prefork", help="Celery pool: prefork, threads or solo."),
    loglevel: str = typer.Option("INFO", help="Celery log level."),
    hostname: str | None = typer.Option(None, help="Node name, e.g. automation@%h."),
) -> None:
    """Start a Celery worker for the control plane's jobs."""
    argv = ["worker", f"--concurrency={concurrency}", f"--pool={pool}", f"--loglevel={loglevel}"]
    if hostname:
        argv.append(f"--hostname={hostname}")
    _app().worker_main(argv)


def beat(loglevel: str = typer.Option("INFO", help="Celery log level.")) -> None:
    """Start Celery beat, which schedules the control plane's jobs."""
    _app().start(["beat", f"--loglevel={loglevel}"])
