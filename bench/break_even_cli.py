"""`specroute bench break-even`: the open-loop break-even benchmark (bench.break_even).

    specroute bench break-even --rates 0.5 --rates 1 --rates 2 --duration 20 \\
        --write-results bench/RESULTS.md

One server at a time, confined to core 0, the clients kept off it: the
baseline (target alone), draft-model speculation at each depth, n-gram
speculation. Writes per-cell JSON, one PNG per segment (speedup vs arrival
rate per arm, the closed-form prediction and the break-even line) and, with
--write-results, the "Break-even (open loop)" section of bench/RESULTS.md.
"""

import asyncio
import json
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress, TaskID

from bench.break_even import ArmServer, Cell, Segment, predicted_speedup, run_cell, speedups
from bench.results import load_note, write_section
from engine.pools.launcher import LaunchOptions, build_server_command
from engine.pools.local import TEST_ENGINE_ARGS, tiny_baseline_pool, tiny_spec_pool
from engine.pools.probe_prompts import CODE_PROMPTS, PROSE_PROMPTS
from engine.pools.server import ServerStartError, VllmServer
from specwire import PoolSpec, SpeculativeConfig

SECTION = "## Break-even (open loop)"
ENGINE_CORE = 0
console = Console()


@dataclass(frozen=True)
class ArmPlan:
    name: str
    k: int
    pool: PoolSpec


def arm_plans(pair_dir: Path, depths: list[int], ngram: bool) -> list[ArmPlan]:
    plans = [ArmPlan("baseline", 0, tiny_baseline_pool(pair_dir, dict(TEST_ENGINE_ARGS)))]
    for k in depths:
        pool = tiny_spec_pool(pair_dir, dict(TEST_ENGINE_ARGS), num_speculative_tokens=k)
        plans.append(ArmPlan(f"draft k={k}", k, pool))
    if ngram:
        pool = tiny_baseline_pool(pair_dir, dict(TEST_ENGINE_ARGS)).model_copy(
            update={
                "name": "tiny-ngram",
                "speculative_config": SpeculativeConfig(method="ngram", num_speculative_tokens=3),
            }
        )
        plans.append(ArmPlan("ngram k=3", 3, pool))
    return plans


def segments_of(names: list[str], temperatures: list[float]) -> list[Segment]:
    prompts = {"code": CODE_PROMPTS, "prose": PROSE_PROMPTS}
    return [Segment(f"{n} T={t:g}", prompts[n], t) for n in names for t in temperatures]


def measure_arm(
    plan: ArmPlan,
    segments: list[Segment],
    rates: list[float],
    duration_s: float,
    max_tokens: int,
    port: int,
    logs: Path,
    progress: Progress,
    task: TaskID,
) -> list[Cell]:
    options = LaunchOptions(cpu_cores=str(ENGINE_CORE))
    server = VllmServer(build_server_command(plan.pool, port, options), logs / f"{port}.log")
    progress.update(task, description=f"{plan.name}: starting")
    server.start()
    cells: list[Cell] = []
    try:
        try:
            server.wait_ready(600)
        except ServerStartError as exc:
            console.print(f"[yellow]{plan.name}: did not start, skipped: {str(exc)[-400:]}")
            progress.advance(task, len(segments) * len(rates))
            return cells
        arm = ArmServer(plan.name, server.base_url, server.model, plan.k, server.pid)
        warm = Segment("warm-up", CODE_PROMPTS, 0.0)
        asyncio.run(run_cell(arm, warm, 2.0, 2.0, 8))
        for segment in segments:
            for rate in rates:
                progress.update(task, description=f"{plan.name}: {segment.name} at {rate:g}/s")
                cell = asyncio.run(run_cell(arm, segment, rate, duration_s, max_tokens))
                cells.append(cell)
                progress.advance(task)
                # A line per cell: progress that shows in a log file too, not only on a tty.
                s = cell.summary()
                progress.console.print(
                    f"{plan.name}: {segment.name} at {rate:g}/s: {s['requests']} requests, "
                    f"{s['errors']} errors, e2e {_fmt(s['e2e_per_token_ms'])} ms/token, "
                    f"{_fmt(s['tokens_per_s'])} tok/s"
                )
    finally:
        server.stop()
    return cells


def _fmt(value: object, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def _pct_of(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.0f}%"


def table(cells: list[Cell], c: float) -> list[str]:
    ratio = speedups(cells)
    lines = [
        "| segment | rate /s | arm | n | err | TTFT p50/p99 ms | TPOT p50/p99 ms | e2e ms/token "
        "| tok/s | target passes/token | tau | drafted | CPU ms/token | KV/seq | speedup "
        "| predicted |",
        "|---|---:|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cell in sorted(cells, key=lambda x: (x.segment, x.rate, x.k, x.arm)):
        s = cell.summary()
        speed = ratio.get((cell.arm, cell.segment, cell.rate))
        tau = s["tau"]
        predicted = (
            predicted_speedup(tau, cell.k, c) if tau and cell.arm.startswith("draft") else None
        )
        kv = s["kv_per_seq"]
        lines.append(
            f"| {cell.segment} | {cell.rate:g} | {cell.arm} | {s['requests']} | {s['errors']} "
            f"| {_fmt(s['ttft_p50_ms'])} / {_fmt(s['ttft_p99_ms'])} "
            f"| {_fmt(s['tpot_p50_ms'])} / {_fmt(s['tpot_p99_ms'])} "
            f"| {_fmt(s['e2e_per_token_ms'])} | {_fmt(s['tokens_per_s'])} "
            f"| {s['target_passes_per_token']:.2f} | {_fmt(tau, '.2f')} "
            f"| {_pct_of(s['drafted_share'])} "
            f"| {_fmt(s['cpu_ms_per_token'])} | {_fmt(kv * 100 if kv else None, '.2f')}% "
            f"| {_fmt(speed, '.2f')} | {_fmt(predicted, '.2f')} |"
        )
    return lines


def plot(cells: list[Cell], c: float, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratio = speedups(cells)
    paths = []
    for segment in sorted({cell.segment for cell in cells}):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        arms = sorted({cell.arm for cell in cells if cell.arm != "baseline"})
        for index, arm in enumerate(arms):
            mine = sorted(
                (cell for cell in cells if cell.arm == arm and cell.segment == segment),
                key=lambda x: x.rate,
            )
            points = [
                (x.rate, ratio[(arm, segment, x.rate)])
                for x in mine
                if (arm, segment, x.rate) in ratio
            ]
            if not points:
                continue
            color = f"C{index}"
            ax.plot(*zip(*points, strict=True), "o-", color=color, label=f"{arm} measured")
            taus = [x.tau for x in mine if x.tau]
            if taus and arm.startswith("draft"):
                pred = predicted_speedup(sum(taus) / len(taus), mine[0].k, c)
                ax.axhline(
                    pred, color=color, linestyle="--", linewidth=1, label=f"{arm} closed form"
                )
        ax.axhline(1.0, color="black", linewidth=1.2, label="break-even")
        ax.set_xscale("log")
        rates = sorted({cell.rate for cell in cells if cell.segment == segment})
        ax.set_xticks(rates, [f"{r:g}" for r in rates])
        ax.minorticks_off()
        ax.set_xlabel("arrival rate (requests/s, Poisson)")
        ax.set_ylabel("speedup (baseline / arm e2e time per token)")
        ax.set_title(f"{segment}: speedup vs load (c = {c:.2f})")
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"break_even_{segment.replace(' ', '_').replace('=', '')}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths


def break_even(
    pair_dir: Path | None = typer.Option(
        None, "--pair-dir", help="Pair to serve; default: the cost-realistic pair derived here."
    ),
    extra_layers: int = typer.Option(40, "--extra-layers", min=0),
    rates: list[float] = typer.Option([0.5, 1.0, 2.0, 4.0], "--rates", help="Arrivals/s."),
    depths: list[int] = typer.Option([1, 2, 3, 5], "--depths", help="Draft-model k."),
    ngram: bool = typer.Option(True, "--ngram/--no-ngram"),
    segment_names: list[str] = typer.Option(["code", "prose"], "--segments"),
    temperatures: list[float] = typer.Option([0.0, 1.0], "--temperatures"),
    duration: float = typer.Option(20.0, "--duration", min=1.0, help="Seconds of arrivals."),
    max_tokens: int = typer.Option(64, "--max-tokens", min=2),
    c: float = typer.Option(
        0.0, "--c", min=0.0, help="Draft/target cost ratio for the closed form (0: assume free)."
    ),
    out_dir: Path = typer.Option(Path("bench/break_even"), "--out-dir", help="PNGs and JSON."),
    write_results: Path | None = typer.Option(None, "--write-results"),
    port: int = typer.Option(18600, "--port"),
) -> None:
    """Poisson arrivals at several rates; baseline vs speculation per segment and depth."""
    unknown = set(segment_names) - {"code", "prose"}
    if unknown:
        raise typer.BadParameter(f"unknown segment(s) {sorted(unknown)}; use code, prose")
    if pair_dir is None:
        from engine.pools.local import tiny_pair_dir
        from engine.tiny.heavy import build_heavy_pair

        pair_dir = build_heavy_pair(tiny_pair_dir(), Path("data/pairs/tiny-heavy"), extra_layers)
    others = set(os.sched_getaffinity(0)) - {ENGINE_CORE}
    if others:
        os.sched_setaffinity(0, others)  # the clients stay off the engine's core
    plans = arm_plans(pair_dir, depths, ngram)
    segments = segments_of(segment_names, temperatures)
    started = datetime.now(UTC)
    load_start = os.getloadavg()
    cells: list[Cell] = []
    with (
        tempfile.TemporaryDirectory(prefix="break-even-") as logs,
        Progress(console=console) as progress,
    ):
        task = progress.add_task("starting", total=len(plans) * len(segments) * len(rates))
        for plan in plans:
            cells += measure_arm(
                plan, segments, rates, duration, max_tokens, port, Path(logs), progress, task
            )
            # After every arm, so a run stopped half-way keeps what it measured.
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "cells.json").write_text(json.dumps([x.summary() for x in cells], indent=1))
    load_end = os.getloadavg()
    lines = table(cells, c)
    console.print("\n".join(lines))
    pngs = plot(cells, c, out_dir)
    for png in pngs:
        console.print(f"plot: {png}")
    if write_results is not None:
        section = [
            SECTION,
            "",
            f"Command: `specroute bench break-even --pair-dir {pair_dir} "
            f"{' '.join(f'--rates {r:g}' for r in rates)} "
            f"{' '.join(f'--depths {k}' for k in depths)} {'--ngram' if ngram else '--no-ngram'} "
            f"--duration {duration:g} --max-tokens {max_tokens} --c {c:g} "
            f"--write-results {write_results}` ({started:%Y-%m-%d %H:%M} UTC; "
            f"{load_note(load_start, load_end)}). Written by the command.",
            "",
            "One server at a time on core 0 (whole process tree), the clients on the other "
            "core; open-loop Poisson arrivals for the duration, every request awaited. "
            "e2e ms/token: mean over requests of end-to-end time / completion tokens; "
            "speedup = the baseline's e2e ms/token / the arm's, same segment and rate; "
            "predicted = tau / (1 + k c), the closed form at low load with the measured tau "
            "(mean acceptance length over the steps that drafted); target passes/token = "
            "(prefills + decode steps) / output tokens, where decode steps = max(drafts, "
            "output tokens - requests - accepted drafts), a step emitting one token plus the "
            "drafts it accepted; drafted: the share of decode steps that carried a draft (an "
            "n-gram proposer drafts only where the context repeats); CPU ms/token: the "
            "server's process tree's CPU time / output tokens; KV/seq: KV-cache use / "
            "running sequences, sampled every 0.5 s.",
            "",
            *lines,
            "",
            *(
                f"![{p.stem}]({p.relative_to(write_results.parent)})"
                for p in pngs
                if p.is_relative_to(write_results.parent)
            ),
            "",
        ]
        write_section(write_results, "\n".join(section))
        console.print(f"wrote the '{SECTION[3:]}' section of {write_results}")
