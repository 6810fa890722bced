"""`specroute gateway ...` commands."""

import os
from pathlib import Path

import typer

app = typer.Typer(help="The OpenAI-compatible gateway (data plane).", no_args_is_help=True)


@app.callback()
def gateway() -> None:
    """The OpenAI-compatible gateway (data plane)."""


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(8080, help="TCP port to listen on."),
    log_level: str = typer.Option("info", help="uvicorn log level."),
    ssl_certfile: Path | None = typer.Option(
        None, "--ssl-certfile", help="PEM certificate to serve HTTPS with (overrides settings)."
    ),
    ssl_keyfile: Path | None = typer.Option(
        None, "--ssl-keyfile", help="PEM private key of the certificate (overrides settings)."
    ),
    workers: int = typer.Option(
        1,
        min=1,
        help="Gateway processes sharing the port (uvicorn's supervisor). Above 1: one "
        "/metrics for all of them (Prometheus multi-process mode), a telemetry id per "
        "process, and quotas shared through SPECROUTE_GATEWAY_REDIS_URL.",
    ),
    local_quotas: bool = typer.Option(
        False,
        "--local-quotas",
        help="With --workers above 1 and no Redis URL: start anyway, each process "
        "enforcing tenant budgets alone (a host admits at most N x a budget).",
    ),
) -> None:
    """Serve the gateway; settings come from SPECROUTE_GATEWAY_* variables."""
    import logging.config

    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    from gateway.app import create_app
    from gateway.settings import GatewaySettings, MissingToken
    from specwire.logs import uvicorn_json_config
    from specwire.tls import TLSConfigError, tls_options

    settings = GatewaySettings()
    try:
        tls = tls_options(
            ssl_certfile or settings.tls.certfile, ssl_keyfile or settings.tls.keyfile
        )
    except TLSConfigError as refused:
        typer.echo(f"refusing to start: {refused}", err=True)
        raise typer.Exit(code=2) from None
    log_config = LOGGING_CONFIG
    if settings.log_format == "json":
        log_config = uvicorn_json_config(LOGGING_CONFIG)
        # Before the app is built, so its start-up warnings are JSON lines too.
        logging.config.dictConfig(log_config)
    if workers > 1 and settings.redis_url is None and not local_quotas:
        typer.echo(
            f"refusing to start: --workers {workers} without SPECROUTE_GATEWAY_REDIS_URL "
            "would give every process its own quota counters (up to "
            f"{workers} x each tenant's budget); set the Redis URL, or pass --local-quotas",
            err=True,
        )
        raise typer.Exit(code=2)
    # NOTE: on SIGTERM uvicorn closes the listening socket at once, lets open
    # requests and streams finish for shutdown_grace_s, then cancels them;
    # the lifespan's shutdown (telemetry flush) runs after.
    options = {
        "host": host,
        "port": port,
        "log_level": log_level,
        "log_config": log_config,
        "timeout_graceful_shutdown": settings.shutdown_grace_s,
        "timeout_keep_alive": settings.keep_alive_s,
        **tls,
    }
    if workers > 1:
        try:
            settings.internal_secret()  # each worker builds its app; refuse here, once
        except MissingToken as refused:
            typer.echo(f"refusing to start: {refused}", err=True)
            raise typer.Exit(code=2) from None
        from gateway.metric_files import MULTIPROC_ENV, metrics_dir

        with metrics_dir() as path:
            # NOTE: set before the workers start: prometheus-client picks its value
            # store (files shared by the processes) when it is first imported.
            os.environ[MULTIPROC_ENV] = str(path)
            uvicorn.run(
                "gateway.multiprocess:create_worker_app",
                factory=True,
                workers=workers,
                **options,  # type: ignore[arg-type]
            )
        return
    try:
        app = create_app(settings)
    except MissingToken as refused:
        typer.echo(f"refusing to start: {refused}", err=True)
        raise typer.Exit(code=2) from None
    uvicorn.run(app, **options)  # type: ignore[arg-type]
