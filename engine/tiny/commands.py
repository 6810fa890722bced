"""Commands of engine.tiny."""

from __future__ import annotations

from pathlib import Path

import typer

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tiny_pair"


def train_tiny(
    out: Path = typer.Option(DEFAULT_OUT, help="Directory that receives target/ and draft/."),
    minutes: float = typer.Option(38.0, help="Wall-clock safety net; steps set the result."),
    target_steps: int = typer.Option(1500, help="Optimiser steps for the target."),
    draft_steps: int = typer.Option(800, help="Optimiser steps for the distilled draft."),
    seed: int = typer.Option(1234, help="Seed for initialisation and batch sampling."),
    batch_size: int = typer.Option(8, help="Windows per optimiser step."),
    seq_len: int = typer.Option(256, help="Tokens per training window."),
    threads: int = typer.Option(2, help="torch intra-op threads."),
    rollouts: int = typer.Option(512, help="Greedy target continuations the draft trains on."),
) -> None:
    """Build the bundled tiny draft-target pair from the Python stdlib, with no download."""
    # NOTE: torch and transformers load only when the command runs.
    from engine.tiny.pipeline import TrainTinySettings
    from engine.tiny.pipeline import train_tiny as run

    run(
        TrainTinySettings(
            out=out,
            minutes=minutes,
            target_steps=target_steps,
            draft_steps=draft_steps,
            seed=seed,
            batch_size=batch_size,
            seq_len=seq_len,
            threads=threads,
            rollouts=rollouts,
        )
    )


def heavy_pair(
    out: Path = typer.Option(
        Path("data/pairs/tiny-heavy"), "--out", help="Directory that receives target/ and draft/."
    ),
    extra_layers: int = typer.Option(
        40, "--extra-layers", min=0, help="Zero-output blocks appended to the target."
    ),
    pair_dir: Path = typer.Option(DEFAULT_OUT, "--pair-dir", help="The pair to derive from."),
) -> None:
    """Derive the cost-realistic pair: the tiny target plus zero-output blocks (same
    distribution, real weight traffic per step) and the tiny draft. Seconds; no download."""
    from engine.tiny.heavy import build_heavy_pair

    root = build_heavy_pair(pair_dir, out, extra_layers)
    typer.echo(f"cost-realistic pair under {root} (target: {extra_layers} extra layers)")


def train_tiny_adapter(
    pair_dir: Path = typer.Option(
        DEFAULT_OUT, "--pair-dir", help="The pair whose target to adapt."
    ),
    name: str = typer.Option("rot13", help="Adapter name: written to <pair-dir>/adapters/NAME."),
    style: str = typer.Option("rot13", help="How the corpus is turned into the tenant's text."),
    steps: int = typer.Option(200, help="Optimiser steps (only the adapter trains)."),
    rank: int = typer.Option(8, help="LoRA rank on every linear layer of the target."),
    seed: int = typer.Option(1234, help="Seed for initialisation and batch sampling."),
    threads: int = typer.Option(2, help="torch intra-op threads."),
) -> None:
    """Train a LoRA adapter for the tiny target on a shifted corpus (a few CPU minutes)
    and record its offline acceptance against the unadapted draft."""
    from engine.tiny.adapter import TrainAdapterSettings, train_adapter
    from engine.tiny.styles import STYLES

    if style not in STYLES:
        raise typer.BadParameter(f"unknown style {style!r}; known: {sorted(STYLES)}")
    train_adapter(
        TrainAdapterSettings(
            pair_dir=pair_dir,
            name=name,
            style=style,
            steps=steps,
            rank=rank,
            seed=seed,
            threads=threads,
        )
    )


def train_tiny_eagle(
    pair_dir: Path = typer.Option(
        DEFAULT_OUT, "--pair-dir", help="The pair whose target the head drafts for."
    ),
    steps: int = typer.Option(400, help="Optimiser steps (only the head trains)."),
    seed: int = typer.Option(1234, help="Seed for initialisation and batch sampling."),
    rollout_fraction: float = typer.Option(
        0.0, min=0.0, max=1.0, help="Share of batches drawn from the target's greedy rollouts."
    ),
    threads: int = typer.Option(2, help="torch intra-op threads."),
) -> None:
    """Train an EAGLE-1 head for the tiny target (a few CPU minutes) into <pair-dir>/eagle
    and record its offline greedy acceptance in eagle_report.json."""
    from engine.tiny.eagle import TrainEagleSettings, train_eagle

    train_eagle(
        TrainEagleSettings(
            pair_dir=pair_dir,
            steps=steps,
            seed=seed,
            rollout_fraction=rollout_fraction,
            threads=threads,
        )
    )


def register(app: typer.Typer) -> None:
    """Add this area's commands to `specroute engine`."""
    app.command("train-tiny")(train_tiny)
    app.command("train-tiny-adapter")(train_tiny_adapter)
    app.command("train-tiny-eagle")(train_tiny_eagle)
    app.command("heavy-pair")(heavy_pair)
