"""`specroute bench streams`: are the engines' streams fair, before and after pinning?

    specroute bench streams --write-results bench/RESULTS.md --plot bench/streams.png

Starts the baseline and the speculating server side by side, each on its own
core (as the demo and the test session do), first the old way (only vLLM's
OpenMP threads bound: the API server and engine core float), then the way the
launcher starts them now (each server's whole process tree on its core), and
measures closed-loop streaming cells at each concurrency against each server:
client TPOT and TTFT against the engine's own (`bench.streams`). Writes a plot
of per-token arrival times and, with --write-results, the "Fair streams"
section of bench/RESULTS.md.
"""

import asyncio
import os
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress

from bench.results import load_note, write_section
from bench.streams import CellStreams, measure_streams
from engine.pools.launcher import LaunchOptions, build_server_command
from engine.pools.local import tiny_baseline_pool, tiny_pair_dir, tiny_spec_pool
from engine.pools.probe_prompts import CODE_PROMPTS
from engine.pools.server import VllmServer
from specwire import PoolSpec

SECTION = "## Fair streams"
ENGINE_ARGS: dict[str, object] = {"max-model-len": 512, "max-num-seqs": 32}
MODES = {"before": False, "after": True}  # mode -> pin the whole server
console = Console()


@dataclass
class ModeResult:
    mode: str
    cells: list[CellStreams] = field(default_factory=list)


def _servers(root: Path, pinned: bool, logs: Path, base_port: int) -> list[VllmServer]:
    cores = sorted(os.sched_getaffinity(0))
    pools: list[tuple[str, PoolSpec]] = [
        ("baseline", tiny_baseline_pool(root, ENGINE_ARGS)),
        ("spec", tiny_spec_pool(root, ENGINE_ARGS)),
    ]
    servers = []
    for index, (name, pool) in enumerate(pools):
        options = LaunchOptions(cpu_cores=str(cores[index % len(cores)]), pin_process=pinned)
        command = build_server_command(pool, base_port + index, options)
        servers.append(VllmServer(command, logs / f"{name}-{'pinned' if pinned else 'loose'}.log"))
    return servers


def run_mode(
    mode: str,
    root: Path,
    concurrency: list[int],
    requests: int,
    max_tokens: int,
    progress: Progress,
    base_port: int,
) -> ModeResult:
    result = ModeResult(mode)
    with tempfile.TemporaryDirectory(prefix="bench-streams-") as logs:
        servers = _servers(root, MODES[mode], Path(logs), base_port)
        task = progress.add_task(f"{mode}: starting servers", total=len(servers) * len(concurrency))
        try:
            for server in servers:
                server.start()
            for server in servers:
                server.wait_ready(600)
            for server, name in zip(servers, ("baseline", "spec"), strict=True):
                # warm-up: the first requests pay one-off allocations
                asyncio.run(
                    measure_streams(name, server.base_url, server.model, CODE_PROMPTS, 2, 0.0, 1, 8)
                )
                for c in concurrency:
                    progress.update(task, description=f"{mode}: {name} at concurrency {c}")
                    cell = asyncio.run(
                        measure_streams(
                            name,
                            server.base_url,
                            server.model,
                            CODE_PROMPTS,
                            c,
                            0.0,
                            max(1, requests // c),
                            max_tokens,
                        )
                    )
                    result.cells.append(cell)
                    progress.advance(task)
        finally:
            for server in servers:
                server.stop()
    return result


def table(results: list[ModeResult]) -> list[str]:
    lines = [
        "| servers | server | conc | requests | client TPOT ms | engine TPOT ms | ratio "
        "| client TTFT ms | engine TTFT ms | largest gap p50 ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for result in results:
        for cell in result.cells:
            s = cell.summary()
            lines.append(
                f"| {result.mode} | {cell.server} | {cell.concurrency} | {s['requests']} "
                f"| {s['client_tpot_ms']:.2f} | {s['engine_tpot_ms']:.2f} "
                f"| {s['tpot_ratio']:.2f} | {s['client_ttft_ms']:.1f} | {s['engine_ttft_ms']:.1f} "
                f"| {s['largest_gap_p50_ms']:.1f} |"
            )
    return lines


def plot(results: list[ModeResult], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    servers = ("baseline", "spec")
    fig, axes = plt.subplots(len(results), 2, figsize=(11, 4 * len(results)), squeeze=False)
    for row, result in enumerate(results):
        for col, name in enumerate(servers):
            ax = axes[row][col]
            cells = [c for c in result.cells if c.server == name]
            cell = cells[0]  # the lowest concurrency
            for trace in cell.traces[:4]:
                cumulative = [sum(trace.tokens[: i + 1]) for i in range(len(trace.tokens))]
                ax.step([t * 1000 for t in trace.arrivals_s], cumulative, where="post")
            if cell.engine_tpot_s and cell.engine_ttft_s:
                n = cell.traces[0].completion_tokens
                ideal = [
                    cell.engine_ttft_s * 1000 + i * cell.engine_tpot_s * 1000 for i in range(n)
                ]
                ax.plot(ideal, range(1, n + 1), "k--", linewidth=1, label="engine's own pace")
                ax.legend(loc="lower right")
            ratio = cell.tpot_ratio or 0.0
            ax.set_title(
                f"{result.mode}: {name}, concurrency {cell.concurrency} "
                f"(client/engine TPOT {ratio:.2f})"
            )
            ax.set_xlabel("ms since the request was sent")
            ax.set_ylabel("tokens received")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def streams(
    concurrency: list[int] = typer.Option([1, 4, 16], "--concurrency", help="Cells to run."),
    requests: int = typer.Option(16, "--requests", min=1, help="Requests per cell."),
    max_tokens: int = typer.Option(64, "--max-tokens", min=2),
    modes: list[str] = typer.Option(["before", "after"], "--mode", help="before and/or after."),
    plot_path: Path = typer.Option(Path("bench/streams.png"), "--plot", help="PNG to write."),
    write_results: Path | None = typer.Option(
        None, "--write-results", help="Replace the 'Fair streams' section of this file."
    ),
    base_port: int = typer.Option(18500, "--base-port"),
) -> None:
    """Per-token arrival times against the engine's clock, servers loose vs pinned."""
    unknown = set(modes) - set(MODES)
    if unknown:
        raise typer.BadParameter(f"unknown mode(s) {sorted(unknown)}; use before, after")
    root = tiny_pair_dir()
    started = datetime.now(UTC)
    load_start = os.getloadavg()
    results = []
    with Progress(console=console) as progress:
        for mode in modes:
            results.append(
                run_mode(mode, root, concurrency, requests, max_tokens, progress, base_port)
            )
    load_end = os.getloadavg()
    lines = table(results)
    console.print("\n".join(lines))
    png = plot(results, plot_path)
    console.print(f"plot: {png}")
    if write_results is not None:
        command = (
            "specroute bench streams "
            f"--concurrency {' --concurrency '.join(map(str, concurrency))} "
            f"--requests {requests} --max-tokens {max_tokens} --plot {plot_path} "
            f"--write-results {write_results}"
        )
        section = [
            SECTION,
            "",
            f"Command: `{command}` ({started:%Y-%m-%d %H:%M} UTC; "
            f"{load_note(load_start, load_end)}). Written by the command.",
            "",
            "Baseline (tiny target) and spec (target + draft, k = 3) servers side by side, "
            "each on its own core, closed-loop streaming completions of "
            f"{max_tokens} tokens at T = 0. *before*: only vLLM's OpenMP threads bound to "
            "the core (`VLLM_CPU_OMP_THREADS_BIND`), the API server and the engine core "
            "float; *after*: the launcher confines each server's whole process tree to its "
            "core (the default now). Client TPOT = (last - first chunk) / (tokens - 1), "
            "mean over requests; engine TPOT = the same from the engine core's own "
            "timestamps (`vllm:request_time_per_output_token_seconds`, deltas over the "
            "cell). Ratio 1.0 = the client sees the engine's pace; well below 1 = bursts.",
            "",
            *lines,
            "",
            f"![per-token arrivals]({png.name})",
            "",
        ]
        write_section(write_results, "\n".join(section))
        console.print(f"wrote the '{SECTION[3:]}' section of {write_results}")
