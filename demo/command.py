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
import os
import signal
import statistics
import time
from pathlib import Path
from types import FrameType

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from demo.monitor import DecisionEvent, Monitor, mean_acceptance_length
from demo.plan import DEMO_EXTRA_LAYERS, DEMO_STAGES, SERVED_MODEL, SegmentPlan, demo_segments
from demo.processes import StartupError
from demo.records import write_records
from demo.report import (
    plot_acceptance,
    plot_tpot,
    summarize,
    summary_table,
    write_tables,
)
from demo.stack import DemoStack, prepare_data_dir
from demo.traffic import TrafficGenerator

SAMPLE_S = 2.0
# The gateway flushes a window every 2 s after it closes (5 s windows): wait for
# the last one so the final acceptance numbers include every request.
SETTLE_S = 8.0
# The live view's spec share is over the requests started in the last RECENT_S
# seconds, so it drops to 0 % after a disable instead of decaying slowly.
RECENT_S = 15.0
console = Console()


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


def _live_view(gen: TrafficGenerator, monitor: Monitor, duration_s: float) -> Group:
    table = Table(title=f"traffic: {gen.elapsed():.0f} / {duration_s:.0f} s", expand=False)
    for header in (
        "segment",
        "sent",
        "ok",
        "errors",
        "shed",
        "in flight",
        f"spec share ({RECENT_S:g} s)",
        "accept. len",
        "TPOT spec/base ms",
        "rollout",
    ):
        table.add_column(header)
    for seg in gen.segments:
        rows = [r for r in gen.results if r.segment == seg.name]
        ok = [r for r in rows if r.ok]
        recent = [r for r in ok if r.started_s >= gen.elapsed() - RECENT_S]
        spec_recent = [r for r in recent if r.arm == "spec"]
        tpot = {
            arm: [r.tpot_s * 1000 for r in ok if r.arm == arm and r.tpot_s is not None]
            for arm in ("spec", "baseline")
        }
        tau = mean_acceptance_length(*monitor.totals(seg.name))
        view = monitor.rollouts.get(seg.name)
        counters = gen.counters[seg.name]
        table.add_row(
            seg.name,
            str(counters.sent),
            str(len(ok)),
            str(len(rows) - len(ok)),
            str(counters.shed),
            str(counters.in_flight),
            f"{len(spec_recent) / len(recent):.0%}" if recent else "-",
            f"{tau:.2f}" if tau is not None else "-",
            " / ".join(
                f"{statistics.median(v):.1f}" if v else "-"
                for v in (tpot["spec"], tpot["baseline"])
            ),
            f"{view.state} {view.percentage:g}%" if view else "?",
        )
    lines = [_decision_line(d) for d in monitor.decisions[-8:]]
    footer = Text("\n".join(lines) if lines else "no decisions yet", style="cyan")
    parts: list[Table | Text] = [table, Text("decisions (newest last):", style="bold"), footer]
    if monitor.last_error:
        parts.append(Text(monitor.last_error, style="yellow"))
    return Group(*parts)


def _decision_line(d: DecisionEvent) -> str:
    return (
        f"#{d.id} t={d.t_s:5.0f}s {d.segment}: {d.kind} {d.from_state}→{d.to_state} "
        f"{d.to_percentage:g}% by {d.actor} — {d.reason}"
    )


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
    try:
        with Live(
            _live_view(gen, monitor, duration_s), console=console, refresh_per_second=2
        ) as live:
            while not traffic.done():
                await monitor.sample(gen.elapsed())
                dead = stack.stack.dead_children()
                if dead:
                    raise StartupError(f"{dead[0].name} died; log tail:\n{dead[0].log_tail()}")
                live.update(_live_view(gen, monitor, duration_s))
                await asyncio.wait({traffic}, timeout=SAMPLE_S)
            await asyncio.sleep(SETTLE_S)
            if not keep_automation:
                # NOTE: the records below must be every decision the automation made;
                # one landing after the last sample would have none.
                await asyncio.to_thread(stack.stop_automation)
            await monitor.sample(gen.elapsed())
            live.update(_live_view(gen, monitor, duration_s))
        console.print()
        await traffic
        await write_records(stack.data_dir / "records", monitor.decisions, monitor.record_markdown)
    finally:
        if not traffic.done():
            traffic.cancel()
            await asyncio.gather(traffic, return_exceptions=True)
        await monitor.close()
    return gen, monitor


def machine_load(load_start: tuple[float, float, float]) -> dict[str, object]:
    """Load average (1 min) when the demo started and now, and the verdict on it."""
    cpus = os.cpu_count() or 1
    end = os.getloadavg()
    busy = max(load_start[0], end[0]) > 0.5 * cpus
    return {"load_start": load_start[0], "load_end": end[0], "cpus": cpus, "busy": busy}


def _report(
    stack: DemoStack,
    gen: TrafficGenerator,
    monitor: Monitor,
    load_start: tuple[float, float, float],
) -> None:
    segments = [s.name for s in gen.segments]
    report_dir = stack.data_dir / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    summaries = summarize(
        segments, gen.results, {k: c.shed for k, c in gen.counters.items()}, monitor
    )
    console.print(summary_table(summaries))
    machine = machine_load(load_start)
    console.print(
        f"machine: load average {machine['load_start']:.1f} at start, "
        f"{machine['load_end']:.1f} at end, {machine['cpus']} CPUs"
        + (
            " — BUSY: other work shared the CPUs with the engines, so latencies and "
            "verdicts are not those of an idle machine"
            if machine["busy"]
            else " (idle apart from the demo)"
        )
    )
    files = write_tables(report_dir, gen.results, summaries, monitor, machine)
    files.append(plot_acceptance(monitor, segments, report_dir / "acceptance.png"))
    files.append(plot_tpot(gen.results, monitor, segments, report_dir / "tpot.png"))
    console.print("[bold]report files:")
    for path in files:
        console.print(f"  {path}")
    records = sorted((stack.data_dir / "records").glob("*.md"))
    console.print(f"[bold]decision records ({len(records)}):")
    for path in records:
        console.print(f"  {path}")
    if not records:
        console.print("  none: the automation changed no rollout's state in this run")


def _start(stack: DemoStack, segments: tuple[SegmentPlan, ...]) -> None:
    with console.status("starting") as status:

        def tick(message: str) -> None:
            status.update(message)

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
    duration: float = typer.Option(240.0, "--duration", min=10, help="Seconds of traffic."),
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
    load_start = os.getloadavg()
    stack = open_stack(data_dir, extra_layers)
    code = 0
    reported = False
    try:
        segments = demo_segments(adapter_segment)
        _start(stack, segments)
        gen, monitor = asyncio.run(
            _drive(stack, segments, duration, rate_scale, keep_automation=keep_running)
        )
        _report(stack, gen, monitor, load_start)
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
        with console.status("stopping") as status:
            stack.stack.stop(on_stop=lambda name: status.update(f"stopping {name}"))
        console.print(f"stopped; logs under {data_dir / 'logs'}")
    if code:
        raise typer.Exit(code=code)
