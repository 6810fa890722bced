"""`specroute gateway ...` commands."""

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
) -> None:
    """Serve the gateway; settings come from SPECROUTE_GATEWAY_* variables."""
    import uvicorn

    from gateway.app import create_app
    from gateway.settings import GatewaySettings, MissingToken

    try:
        app = create_app(GatewaySettings())
    except MissingToken as refused:
        typer.echo(f"refusing to start: {refused}", err=True)
        raise typer.Exit(code=2) from None
    uvicorn.run(app, host=host, port=port, log_level=log_level)
