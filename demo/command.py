"""`specroute demo`: the main job end to end on embedded defaults.

    make demo                       # = specroute demo (4 minutes of traffic)
    specroute demo --duration 60 --data-dir data/demo --keep-running

Migrates an SQLite database under the data dir, registers the bundled tiny pair,
pools, segments, a threshold set, tenants and keys and canary rollouts; starts
the control API, a Celery worker and beat, both vLLM pools and the gateway;
drives open-loop traffic with a live view; then writes the report (table,
plots, decision records) and stops every process it started — also on Ctrl-C.
"""

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import typer
from rich.live import Live

from demo.machine import OtherWork
from demo.monitor import Monitor
from demo.plan import DEMO_EXTRA_LAYERS, DEMO_STAGES, SERVED_MODEL, SegmentPlan, demo_segments
from demo.processes import StartupError
from demo.records import record_paths, write_records
from demo.report import (
    plot_acceptance,
    plot_tpot,
    summarize,
    summary_table,
    write_tables,
)
from demo.stack import DemoStack, prepare_data_dir
from demo.traffic import TrafficGenerator
from demo.view import PlainLines, live_view, make_console, stamp

SAMPLE_S = 2.0
# The gateway flushes a window every 2 s after it closes (5 s windows): wait for
# the last one so the final acceptance numbers include every request.
SETTLE_S = 8.0
console = make_console()


def open_stack(data_dir: Path, extra_layers: int) -> DemoStack:
    """A stack on a wiped data dir (the demo's own, or a new one); a directory that is
    not the demo's is refused with exit code 2 and the reason."""
    try:
        data_dir = prepare_data_dir(data_dir)
    except StartupError as exc:
        console.print(f"[red]{exc}")
        raise typer.Exit(code=2) from exc
    stack = DemoStack.create(data_dir)
    stack.heavy_extra_layers = extra_layers
    return stack


class Interrupted(Exception):
    """SIGTERM, handled like Ctrl-C: stop everything, then exit."""


def _on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    raise Interrupted


@contextlib.contextmanager
def _view(
    gen: TrafficGenerator, monitor: Monitor, duration_s: float, plain: PlainLines | None
) -> Iterator[Callable[[bool], None]]:
    """`show(final)`: the live table on a terminal, plain lines otherwise."""
    if plain is not None:
        yield lambda final: plain.update(gen, monitor, final=final)
        return
    with Live(live_view(gen, monitor, duration_s), console=console, refresh_per_second=2) as live:
        yield lambda _final: live.update(live_view(gen, monitor, duration_s))


async def _drive(
    stack: DemoStack,
    segments: tuple[SegmentPlan, ...],
    duration_s: float,
    rate_scale: float,
    *,
    keep_automation: bool,
) -> tuple[TrafficGenerator, Monitor]:
    plan = stack.provisioned
    assert plan is not None
    gen = TrafficGenerator(
        stack.endpoints.gateway_url,
        plan.tenant_keys,
        segments,
        model=SERVED_MODEL,
        rate_scale=rate_scale,
    )
    monitor = Monitor(
        gateway_url=stack.endpoints.gateway_url,
        control_url=stack.endpoints.control_url,
        admin_token=stack.endpoints.admin_token,
        rollout_segments={rid: seg for seg, rid in plan.rollout_ids.items()},
        started_wall=time.time(),
    )
    traffic = asyncio.create_task(gen.run(duration_s))
    plain = None if console.is_terminal else PlainLines(console, duration_s)
    try:
        with _view(gen, monitor, duration_s, plain) as show:
            while not traffic.done():
                await monitor.sample(gen.elapsed())
                dead = stack.stack.dead_children()
                if dead:
                    raise StartupError(f"{dead[0].name} died; log tail:\n{dead[0].log_tail()}")
                show(False)
                await asyncio.wait({traffic}, timeout=SAMPLE_S)
            await asyncio.sleep(SETTLE_S)
            if not keep_automation:
                # NOTE: the records below must be every decision the automation made;
                # one landing after the last sample would have none.
                await asyncio.to_thread(stack.stop_automation)
            await monitor.sample(gen.elapsed())
            show(True)
        console.print()
        await traffic
        await write_records(stack.data_dir / "records", monitor.decisions, monitor.record_markdown)
    finally:
        if not traffic.done():
            traffic.cancel()
            await asyncio.gather(traffic, return_exceptions=True)
        await monitor.close()
    return gen, monitor


def machine_load(other: OtherWork, stack: DemoStack | None = None) -> dict[str, object]:
    """How busy other work kept the CPUs while the demo ran (demo/machine.py), with the
    load averages for reference."""
    return other.reading(stack.stack.descendants() if stack is not None else None)


def _report(
    stack: DemoStack,
    gen: TrafficGenerator,
    monitor: Monitor,
    other: OtherWork,
) -> None:
    segments = [s.name for s in gen.segments]
    report_dir = stack.data_dir / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    summaries = summarize(
        segments, gen.results, {k: c.shed for k, c in gen.counters.items()}, monitor
    )
    console.print(summary_table(summaries))
    machine = machine_load(other, stack)
    console.print(machine_line(machine))
    files = write_tables(report_dir, gen.results, summaries, monitor, machine)
    files.append(plot_acceptance(monitor, segments, report_dir / "acceptance.png"))
    files.append(plot_tpot(gen.results, monitor, segments, report_dir / "tpot.png"))
    console.print("[bold]report files:")
    for path in files:
        console.print(f"  {path}")
    records = record_paths(stack.data_dir / "records")
    console.print(f"[bold]decision records ({len(records)}):")
    for path in records:
        console.print(f"  {path}")
    if not records:
        console.print("  none: the automation changed no rollout's state in this run")


def machine_line(machine: dict[str, Any]) -> str:
    verdict = (
        " — BUSY: other work shared the CPUs with the engines, so latencies and verdicts "
        "are not those of an idle machine"
        if machine["busy"]
        else " (idle apart from the demo)"
    )
    return (
        f"machine: other work kept {machine['other_cores']:.2f} of {machine['cpus']} CPUs "
        f"busy on average (the demo itself {machine['demo_cores']:.2f}); load average "
        f"{machine['load_start']:.1f} at start, {machine['load_end']:.1f} at end{verdict}"
    )


@contextlib.contextmanager
def _status(first: str) -> Iterator[Callable[[str], None]]:
    """A spinner on a terminal; timestamped lines in a pipe."""
    if not console.is_terminal:
        console.print(f"{stamp()} {first}", markup=False)
        yield lambda message: console.print(f"{stamp()} {message}", markup=False)
        return
    with console.status(first) as status:
        yield status.update


def _start(stack: DemoStack, segments: tuple[SegmentPlan, ...]) -> None:
    with _status("starting") as tick:
        plan = stack.provision_control(tick, segments=segments)
        console.print(
            f"registered pair version {plan.pair_version_id}, pools {plan.spec_pool} and "
            f"{plan.baseline_pool}, {len(plan.rollout_ids)} rollouts (draft)"
        )
        took = stack.start_serving(tick)
        console.print(f"both pools serving after {took:.0f} s; gateway ready")
        tick("starting the rollouts (canary)")
        stack.start_rollouts(tick)
        console.print(f"rollouts in canary at {DEMO_STAGES[0]:g} %: {plan.rollout_ids}")


def _print_urls(stack: DemoStack) -> None:
    e = stack.endpoints
    assert stack.provisioned is not None
    console.print(f"gateway (OpenAI API): {e.gateway_url}/v1   metrics: {e.gateway_url}/metrics")
    console.print(f"control API: {e.control_url}/admin/v1   admin token: {e.admin_token}")
    for tenant, key in stack.provisioned.tenant_keys.items():
        console.print(f"tenant {tenant}: API key {key}")
    console.print(f"logs: {stack.data_dir / 'logs'}")


def demo(
    duration: float = typer.Option(360.0, "--duration", min=10, help="Seconds of traffic."),
    data_dir: Path = typer.Option(
        Path("data/demo"), "--data-dir", help="Demo state, logs and report (wiped per run)."
    ),
    keep_running: bool = typer.Option(
        False, "--keep-running", help="After the report, keep the stack up until Ctrl-C."
    ),
    rate_scale: float = typer.Option(
        1.0, "--rate-scale", min=0.05, help="Multiply every segment's arrival rate."
    ),
    extra_layers: int = typer.Option(
        DEMO_EXTRA_LAYERS,
        "--extra-layers",
        min=0,
        help="Zero-output blocks added to the tiny target (the cost-realistic pair, "
        "engine/tiny/heavy.py); 0 serves the bundled pair as shipped.",
    ),
    adapter_segment: bool = typer.Option(
        False,
        "--adapter-segment/--no-adapter-segment",
        help="Add the cipher-adapter segment (its requests name the rot13 LoRA adapter; "
        "both pools then serve it, which slows every request on CPU).",
    ),
) -> None:
    """Run the end-to-end demo: stack up, open-loop traffic, decisions, report."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    other = OtherWork()  # before anything of the demo's runs
    stack = open_stack(data_dir, extra_layers)
    code = 0
    reported = False
    try:
        segments = demo_segments(adapter_segment)
        _start(stack, segments)
        gen, monitor = asyncio.run(
            _drive(stack, segments, duration, rate_scale, keep_automation=keep_running)
        )
        _report(stack, gen, monitor, other)
        reported = True
        if keep_running:
            _print_urls(stack)
            console.print("[bold]stack running; Ctrl-C stops it")
            while not stack.stack.dead_children():
                time.sleep(1.0)
            console.print(f"[red]{stack.stack.dead_children()[0].name} exited")
    except (KeyboardInterrupt, Interrupted):
        console.print("[yellow]interrupted: stopping every process the demo started")
        code = 0 if reported and keep_running else 130
    except StartupError as exc:
        console.print(f"[red]{exc}")
        code = 1
    finally:
        # NOTE: a second Ctrl-C (or a SIGTERM) must not cut the clean-up short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with _status("stopping") as tick:
            stack.stack.stop(on_stop=lambda name: tick(f"stopping {name}"))
        console.print(f"stopped; logs under {data_dir / 'logs'}")
    if code:
        raise typer.Exit(code=code)
