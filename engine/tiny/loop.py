"""Shared optimisation loop: AdamW, warmup + cosine schedule, progress, time guard."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

LOG_EVERY = 10


@dataclass(frozen=True)
class LoopSettings:
    steps: int
    lr: float
    warmup_steps: int
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    min_lr_ratio: float = 0.1


@dataclass
class LoopResult:
    steps_done: int
    seconds: float
    final_loss: float
    stopped_by_time: bool
    losses: list[float] = field(default_factory=list)  # one running mean per LOG_EVERY steps


def lr_at(step: int, s: LoopSettings) -> float:
    if step < s.warmup_steps:
        return s.lr * (step + 1) / s.warmup_steps
    progress = (step - s.warmup_steps) / max(1, s.steps - s.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return s.lr * (s.min_lr_ratio + (1 - s.min_lr_ratio) * cosine)


def run_loop(
    name: str,
    model: torch.nn.Module,
    loss_fn: Callable[[int], torch.Tensor],
    settings: LoopSettings,
    deadline: float | None,
    log: Callable[[str], None],
) -> LoopResult:
    """Minimise ``loss_fn(step)`` for ``settings.steps`` steps or until ``deadline``.

    NOTE: the step count, not wall time, is what makes a run reproducible; the
    deadline is a safety net that is reported when it fires.
    """
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": settings.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=settings.lr,
        betas=(0.9, 0.95),
    )
    model.train()
    start = time.monotonic()
    window: list[float] = []
    result = LoopResult(0, 0.0, float("nan"), False)
    columns = (
        TextColumn(f"[bold]{name}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} loss {task.fields[loss]:.3f}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(name, total=settings.steps, loss=float("nan"))
        for step in range(settings.steps):
            if deadline is not None and time.monotonic() > deadline:
                result.stopped_by_time = True
                log(f"{name}: time budget reached at step {step}; stopping early")
                break
            for group in opt.param_groups:
                group["lr"] = lr_at(step, settings)
            loss = loss_fn(step)
            opt.zero_grad(set_to_none=True)
            torch.autograd.backward(loss)
            torch.nn.utils.clip_grad_norm_(model.parameters(), settings.grad_clip)
            opt.step()
            window.append(float(loss.detach()))
            result.steps_done = step + 1
            progress.update(task, advance=1, loss=window[-1])
            if len(window) == LOG_EVERY or step == settings.steps - 1:
                mean = sum(window) / len(window)
                result.losses.append(mean)
                elapsed = time.monotonic() - start
                log(f"{name} step {step + 1}/{settings.steps} loss {mean:.4f} ({elapsed:.0f}s)")
                window.clear()
    result.seconds = time.monotonic() - start
    result.final_loss = result.losses[-1] if result.losses else float("nan")
    model.eval()
    return result
