"""`specroute engine distill --target DIR --prompts FILE --out DIR`."""

import hashlib
import json
from pathlib import Path
from typing import Any

import typer

from specwire.admin_client import DEV_ADMIN_TOKEN


def load_prompts(path: Path) -> list[Any]:
    """JSON lines with "messages" (chat) or "prompt" (text); any other file: one prompt a line."""
    if not path.is_file():
        raise typer.BadParameter(f"{path} does not exist", param_hint="--prompts")
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if path.suffix != ".jsonl":
        return lines
    prompts: list[Any] = []
    for number, line in enumerate(lines, start=1):
        entry = json.loads(line)
        if "messages" in entry:
            prompts.append(entry["messages"])
        elif "prompt" in entry:
            prompts.append(entry["prompt"])
        else:
            raise typer.BadParameter(f"{path}:{number}: needs messages or prompt")
    return prompts


def write_card(
    out: Path, summary: dict[str, Any], training_set: str, leakage: dict[str, Any]
) -> None:
    lines = [
        f"# Draft distilled for {summary['target']}",
        "",
        "Trained by `specroute engine distill` on the target's full next-token distribution "
        "(forward KL) along its own greedy continuations of the training prompts, rendered "
        "through the target's chat template.",
        "",
        f"- Target: `{summary['target']}` ({summary['target_layers']} layers)",
        f"- Draft: {summary['layers']} layers, the target's tokenizer, width and heads",
        f"- Training set: `{training_set}` ({summary['prompts']} prompts)",
        f"- Steps: {summary['steps']}"
        + (f" (resumed from step {summary['resumed_from']})" if summary["resumed_from"] else ""),
        f"- KL loss: {summary['first_loss']:.4f} at the first step, "
        f"{summary['final_loss']:.4f} at the last",
        f"- Leakage guard: {leakage['overlapping']} training prompts overlap "
        f"{', '.join(leakage['eval_sets']) or 'no eval set checked'} "
        f"(hashed {leakage['ngram']}-grams)",
        f"- Settings: `{json.dumps(summary['config'], sort_keys=True)}`",
        "",
        "Register it with `specroute admin pair register NAME --target TARGET --draft "
        "THIS_DIR`, then evaluate it with `specroute engine evaluate --pair-version ID "
        f"--eval-set NAME --training-set {training_set}`.",
    ]
    (out / "README.md").write_text("\n".join(lines) + "\n")
    (out / "distill.json").write_text(
        json.dumps({**summary, "training_set": training_set, "leakage": leakage}, indent=2)
    )


def distill(
    target: Path = typer.Option(..., "--target", help="Target model directory (Hugging Face)."),
    prompts: Path = typer.Option(..., "--prompts", help="Training prompts (.jsonl or text)."),
    out: Path = typer.Option(..., "--out", help="Draft output directory (resumes if present)."),
    layers: int | None = typer.Option(None, "--layers", min=1, help="Draft layers (target/4)."),
    steps: int = typer.Option(200, "--steps", min=1),
    batch_size: int = typer.Option(4, "--batch-size", min=1),
    learning_rate: float = typer.Option(1e-3, "--lr", min=0.0),
    new_tokens: int = typer.Option(48, "--new-tokens", min=1, help="Target tokens per prompt."),
    checkpoint_every: int = typer.Option(50, "--checkpoint-every", min=1),
    eval_set: list[str] = typer.Option(
        [], "--eval-set", help="Eval set whose prompts must not be trained on (repeatable)."
    ),
    allow_leakage: bool = typer.Option(
        False, "--allow-leakage", help="Warn with the count instead of refusing."
    ),
    control_url: str = typer.Option(
        "http://127.0.0.1:8000", "--url", envvar="SPECROUTE_ADMIN_URL", help="Control plane URL."
    ),
    token: str = typer.Option(
        DEV_ADMIN_TOKEN, "--token", envvar="SPECROUTE_ADMIN_TOKEN", help="Admin token."
    ),
) -> None:
    """Distil a draft for a target from a prompt file (progress, checkpoints, model card)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from engine.distill.leakage import NGRAM, overlapping
    from engine.evaluation.run import EvaluationError, admin_client, latest_eval_set
    from specwire.prompts import PromptStoreError, load_store

    console = Console(soft_wrap=True)
    if not (target / "config.json").is_file():
        raise typer.BadParameter(f"{target} has no config.json", param_hint="--target")
    training = load_prompts(prompts)
    if not training:
        raise typer.BadParameter(f"{prompts} has no prompts", param_hint="--prompts")
    training_set = f"{prompts.name}@sha256:{hashlib.sha256(prompts.read_bytes()).hexdigest()[:16]}"
    held_out: list[Any] = []
    try:
        if eval_set:
            with admin_client(control_url, token) as api:
                for name in eval_set:
                    detail = latest_eval_set(api, name)
                    held_out += list(load_store(detail["prompt_store"]).values())
    except (EvaluationError, PromptStoreError) as exc:
        console.print(f"[red]{exc}")
        raise typer.Exit(code=1) from exc
    leaked = overlapping(training, held_out)
    leakage = {"overlapping": leaked, "eval_sets": eval_set, "ngram": NGRAM}
    if leaked:
        message = (
            f"{leaked} of {len(training)} training prompts overlap eval set(s) "
            f"{', '.join(eval_set)} (hashed {NGRAM}-grams)"
        )
        if not allow_leakage:
            console.print(f"[red]refusing: {message}; remove them or pass --allow-leakage")
            raise typer.Exit(code=1)
        console.print(f"[yellow]warning: {message}")

    from engine.distill.train import DistillConfig
    from engine.distill.train import distill as run

    cfg = DistillConfig(
        layers=layers,
        steps=steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        new_tokens=new_tokens,
        checkpoint_every=checkpoint_every,
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} loss {task.fields[loss]}"),
        TimeRemainingColumn(),
        console=console,
    ) as bar:
        task = bar.add_task("distilling", total=steps, loss="-")

        def progress(step: int, total: int, loss: float) -> None:
            bar.update(task, completed=step, loss=f"{loss:.4f}")

        summary = run(target, training, out, cfg, progress=progress)
    write_card(out, summary, training_set, leakage)
    console.print(
        f"draft written to {out}: {summary['layers']} layers, {summary['steps']} steps, KL "
        f"{summary['first_loss']:.4f} → {summary['final_loss']:.4f}; training set {training_set}"
    )


def register(app: typer.Typer) -> None:
    """Add this area's commands to `specroute engine`."""
    app.command("distill")(distill)
