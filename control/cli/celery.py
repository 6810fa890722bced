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
    if settings.log_format == "json":
        _json_logging()
    return create_celery_app(settings)


def _json_logging() -> None:
    """SPECROUTE_LOG_FORMAT=json: Celery's own lines and the tasks' as JSON objects.

    NOTE: a receiver of `setup_logging` replaces Celery's logging set-up altogether
    (Celery then configures no handler of its own), so this one handler on the
    root logger carries everything; the worker's and tasks' loggers propagate to it.
    """
    import logging
    import sys

    from celery.signals import setup_logging

    from specwire.logs import JsonFormatter

    def configure(loglevel: int | str | None = None, **_: object) -> None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        root = logging.getLogger()
        root.handlers = [handler]
        root.setLevel(loglevel or logging.INFO)

    setup_logging.connect(configure, weak=False)


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
    app = _app()
    app.worker_main([*_quiet(), *argv])


def beat(loglevel: str = typer.Option("INFO", help="Celery log level.")) -> None:
    """Start Celery beat, which schedules the control plane's jobs."""
    app = _app()
    app.start([*_quiet(), "beat", f"--loglevel={loglevel}"])


def _quiet() -> list[str]:
    """Celery's --quiet with JSON logs: its start-up banner is printed, not logged,
    and would be the only non-JSON lines."""
    return ["--quiet"] if get_settings().log_format == "json" else []
