"""`specroute control migrate` and `specroute control serve`."""

from pathlib import Path

import typer

app = typer.Typer(
    help="Control plane: database migrations and the API server.", no_args_is_help=True
)

DatabaseUrl = typer.Option(
    None,
    "--database-url",
    envvar="SPECROUTE_DATABASE_URL",
    help="SQLAlchemy URL; default: settings (an SQLite file under the data dir).",
)


def _url(database_url: str | None) -> str:
    from control.settings import ControlSettings

    settings = ControlSettings(database_url=database_url) if database_url else ControlSettings()
    url = settings.resolved_database_url()
    if url.startswith("sqlite:///"):
        # The embedded default lives under the data dir, which may not exist yet.
        from pathlib import Path

        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return url


@app.command()
def migrate(
    database_url: str | None = DatabaseUrl,
    revision: str = typer.Option("head", help="Target revision ('base' downgrades all)."),
) -> None:
    """Upgrade (or downgrade) the control database with the Alembic migrations."""
    from control.migrate import current_revision, downgrade, upgrade

    url = _url(database_url)
    if revision == "base":
        downgrade(url, "base")
    else:
        upgrade(url, revision)
    typer.echo(f"database at revision {current_revision(url)}")


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8000, help="Port to bind."),
    database_url: str | None = DatabaseUrl,
    migrate_first: bool = typer.Option(
        True, "--migrate/--no-migrate", help="Upgrade the database to head before serving."
    ),
    log_level: str = typer.Option(
        "info", help="uvicorn log level; debug also shows snapshot polls and heartbeats."
    ),
    dev: bool = typer.Option(
        False,
        "--dev",
        envvar="SPECROUTE_DEV_TOKENS",
        help=(
            "Development only: accept the well-known dev tokens where "
            "SPECROUTE_ADMIN_TOKEN / SPECROUTE_INTERNAL_TOKEN are unset."
        ),
    ),
    ssl_certfile: Path | None = typer.Option(
        None, "--ssl-certfile", help="PEM certificate to serve HTTPS with (overrides settings)."
    ),
    ssl_keyfile: Path | None = typer.Option(
        None, "--ssl-keyfile", help="PEM private key of the certificate (overrides settings)."
    ),
) -> None:
    """Serve the admin API (/admin/v1) and the internal API (/internal/v1) under uvicorn."""
    import logging.config

    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    from control.access_log import uvicorn_log_config
    from control.app import create_app
    from control.migrate import upgrade
    from control.settings import ControlSettings, MissingTokens
    from specwire.logs import uvicorn_json_config
    from specwire.tls import TLSConfigError, tls_options

    settings = ControlSettings(database_url=_url(database_url), dev_tokens=dev)
    try:
        tls = tls_options(
            ssl_certfile or settings.tls.certfile, ssl_keyfile or settings.tls.keyfile
        )
    except TLSConfigError as refused:
        typer.echo(f"refusing to start: {refused}", err=True)
        raise typer.Exit(code=2) from None
    log_config = uvicorn_log_config(LOGGING_CONFIG)
    if settings.log_format == "json":
        log_config = uvicorn_json_config(log_config)
        # Before the app is built, so its start-up warnings are JSON lines too.
        logging.config.dictConfig(log_config)
    try:
        app = create_app(settings)
    except MissingTokens as refused:
        typer.echo(f"refusing to start: {refused}", err=True)
        raise typer.Exit(code=2) from None
    if migrate_first:
        upgrade(settings.resolved_database_url())
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        log_config=log_config,
        timeout_graceful_shutdown=settings.shutdown_grace_s,
        timeout_keep_alive=settings.keep_alive_s,
        **tls,  # type: ignore[arg-type]
    )


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


@app.command()
def capacity(
    kubernetes: bool = typer.Option(
        ..., "--kubernetes", help="Scale each pool's Deployment (the one backend today)."
    ),
    once: bool = typer.Option(False, "--once", help="One pass, then exit (1 if any failed)."),
    api_host: str | None = typer.Option(
        None,
        "--api-host",
        envvar="SPECROUTE_CAPACITY_API_HOST",
        help="Kubernetes API URL; default: in-cluster (the pod's ServiceAccount).",
    ),
    api_token: str | None = typer.Option(
        None,
        "--api-token",
        envvar="SPECROUTE_CAPACITY_API_TOKEN",
        help="Bearer token for --api-host (in-cluster: the ServiceAccount's).",
    ),
) -> None:
    """Keep every pool's Deployment at the pool's desired workers (Kubernetes)."""
    import logging
    import time
    from pathlib import Path

    from control.capacity.kubernetes import KubernetesScaler, apps_api, reconcile
    from control.db import Database
    from control.settings import get_settings

    del kubernetes  # required: it names the backend
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    settings = get_settings()
    namespace = settings.capacity.namespace
    if namespace is None:
        try:
            namespace = Path(SERVICE_ACCOUNT_NAMESPACE).read_text().strip()
        except OSError:
            typer.echo("no namespace: set SPECROUTE_CAPACITY_NAMESPACE", err=True)
            raise typer.Exit(code=2) from None
    scaler = KubernetesScaler(
        apps_api(api_host, api_token), namespace, settings.capacity.deployment_template
    )
    database = Database(settings.resolved_database_url())
    try:
        while True:
            results = reconcile(database, scaler.scale)
            for r in results:
                typer.echo(f"{r.pool}: {r.deployment} {r.outcome} {r.current} -> {r.desired}")
            if once:
                failed = [r for r in results if r.outcome not in ("scaled", "unchanged")]
                raise typer.Exit(code=1 if failed else 0)
            time.sleep(settings.capacity.interval_s)
    finally:
        database.dispose()
