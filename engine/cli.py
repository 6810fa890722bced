"""`specroute engine ...`: each area registers its own commands here."""

import typer

app = typer.Typer(help="Engine side: the bundled tiny pair and vLLM pools.", no_args_is_help=True)


def _register() -> None:
    # NOTE: the command modules import torch/vllm only inside their functions.
    from engine.pools import commands as pool_commands
    from engine.tiny import commands as tiny_commands

    tiny_commands.register(app)
    pool_commands.register(app)


_register()
