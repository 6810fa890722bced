"""`specroute bench ...`: the benchmark commands that start their own engines."""

import typer

app = typer.Typer(help="Benchmarks on real vLLM engines (long runs; see bench/RESULTS.md).")


def register() -> None:
    from bench.break_even_cli import break_even
    from bench.demo_outcomes import demo_outcomes
    from bench.policy_cli import policy
    from bench.streams_cli import streams

    app.command("streams")(streams)
    app.command("break-even")(break_even)
    app.command(
        "demo-outcomes",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(demo_outcomes)
    app.command("policy")(policy)


register()
