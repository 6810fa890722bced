"""`specroute engine ...`: each area registers its own commands here."""

import typer

app = typer.Typer(help="Engine side: the bundled tiny pair and vLLM pools.", no_args_is_help=True)


def _register() -> None:
    # NOTE: the command modules import torch/vllm only inside their functions.
    from engine.distill import commands as distill_commands
    from engine.evaluation import commands as evaluation_commands
    from engine.pools import commands as pool_commands
    from engine.tiny import commands as tiny_commands

    tiny_commands.register(app)
    pool_commands.register(app)
    evaluation_commands.register(app)
    distill_commands.register(app)


_register()


@app.command("fake")
def fake(
    host: str = "127.0.0.1",
    port: int = 9100,
    tokens: int = typer.Option(16, help="tokens per response"),
    interval_ms: float = typer.Option(5.0, help="gap before each token"),
    model: str = "bench-model",
) -> None:
    """A fake OpenAI engine: fixed tokens at a fixed pace, no model (tests, benchmarks)."""
    from engine.fake import FakeUpstream, serve

    serve(FakeUpstream(tokens, interval_ms / 1000.0, model), host, port)
