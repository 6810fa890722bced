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
    per_request_metrics: bool = typer.Option(
        True,
        help="Per-request speculative metrics in the final chunk (vLLM's "
        "--per-request-spec-decode-metrics).",
    ),
    spec_counters: bool = typer.Option(
        False, help="A speculating server's vllm:spec_decode_* counters on /metrics."
    ),
) -> None:
    """A fake OpenAI engine: fixed tokens at a fixed pace, no model (tests, benchmarks)."""
    from engine.fake import FakeUpstream, serve

    upstream = FakeUpstream(
        tokens,
        interval_ms / 1000.0,
        model,
        per_request_metrics=per_request_metrics,
        spec_counters=spec_counters,
    )
    serve(upstream, host, port)
