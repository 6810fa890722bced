"""`specroute bench policy`: the policy against static choices on mixed traffic.

    specroute bench policy --duration 240 --write-results bench/RESULTS.md

Starts the demo's stack once (control, Celery worker and beat, the gateway, a
speculating and a baseline vLLM pool on the cost-realistic pair) and sends the
demo's segment mix (by default the segments that name no LoRA adapter; --segment
picks), one seeded open-loop schedule, four times:

1. all baseline (every request forced to the baseline arm with the override header);
2. all speculation (forced to the spec arm; no holdout, no cohorts);
3. specroute: the rollouts start at canary and the automation decides;
4. the oracle: per segment, the arm that was faster in phases 1 and 2.

The automation is idle in phases 1 and 2 (the rollouts are drafts) and stopped
after phase 3, so its decisions are final before the oracle runs. Writes a JSON
summary and PNGs under --out-dir, the per-request CSV and decision records
under --data-dir, and, with --write-results, the "Policy vs static" section.
"""

import asyncio
import csv
import json
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress, TaskID

from bench import policy as p
from bench.policy_plot import plot_segments
from bench.results import load_note, write_section
from demo.command import open_stack
from demo.monitor import Monitor
from demo.plan import (
    ALL_SEGMENTS,
    DEFAULT_SEGMENTS,
    DEMO_EXTRA_LAYERS,
    DEMO_THRESHOLDS,
    SERVED_MODEL,
    AdminClient,
    SegmentPlan,
)
from demo.processes import StartupError
from demo.records import write_records
from demo.report import plot_tpot
from demo.stack import DemoStack, Tick
from demo.traffic import RequestResult, TrafficGenerator

SECTION = "## Policy vs static"
SAMPLE_S = 2.0
# After phase 3: the gateway flushes its last telemetry window and the automation
# judges it before it is stopped, so no decision lands after the report.
SETTLE_S = 8.0
PHASE_PAUSE_S = 5.0  # the engines' queues empty between phases
CORE_CHILDREN = frozenset({"control", "gateway", "engine-spec", "engine-baseline"})
console = Console()


def allow_overrides(stack: DemoStack) -> None:
    """Let the demo's tenants force an arm with the override header (static phases)."""
    assert stack.provisioned is not None
    admin = AdminClient(stack.endpoints.control_url, stack.endpoints.admin_token)
    try:
        for tenant in list(admin.tenants.list()):
            if tenant["name"] in stack.provisioned.tenant_keys:
                admin.tenants.update(tenant["id"], {"override_allowed": True})
    finally:
        admin.close()


def choose_segments(names: Sequence[str], users: int | None) -> tuple[SegmentPlan, ...]:
    """The demo's segments by name; none named: every one that names no LoRA adapter.

    NOTE: an adapter segment makes both pools LoRA-enabled and adds its traffic; with
    it, each static phase saturated its one pool (bench/RESULTS.md, "Policy vs static"),
    and a saturated comparison is one pool against two. Name it to include it."""
    known = {s.name: s for s in ALL_SEGMENTS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise typer.BadParameter(
            f"unknown segment(s) {unknown}; the demo's are {sorted(known)}", param_hint="--segment"
        )
    chosen = [known[n] for n in dict.fromkeys(names)] or list(DEFAULT_SEGMENTS)
    return tuple(s if users is None else replace(s, users=users) for s in chosen)


def _start(
    stack: DemoStack,
    tick: Tick,
    thresholds: dict[str, object] | None,
    segments: tuple[SegmentPlan, ...],
) -> None:
    stack.provision_control(tick, thresholds, segments)
    allow_overrides(stack)
    took = stack.start_serving(tick)
    console.print(f"both pools serving after {took:.0f} s; gateway ready")


class Phases:
    """Runs one phase after another against the stack, on the same schedule."""

    def __init__(
        self,
        stack: DemoStack,
        segments: Sequence[SegmentPlan],
        duration_s: float,
        rate_scale: float,
        seed: int,
        progress: Progress,
    ) -> None:
        self.stack = stack
        self.segments = segments
        self.duration_s = duration_s
        self.rate_scale = rate_scale
        self.seed = seed
        self.progress = progress
        self.task: TaskID = progress.add_task("phases", total=4 * duration_s)
        self.done_s = 0.0
        self.shed: dict[str, dict[str, int]] = {}
        # 1-minute load average at each phase's start and end: the phases run one after
        # another on a shared machine, so a change in load between them shows here.
        self.load: dict[str, tuple[float, float]] = {}

    def generator(self, headers: Mapping[str, Mapping[str, str]] | None) -> TrafficGenerator:
        plan = self.stack.provisioned
        assert plan is not None
        return TrafficGenerator(
            self.stack.endpoints.gateway_url,
            plan.tenant_keys,
            self.segments,
            model=SERVED_MODEL,
            seed=self.seed,
            rate_scale=self.rate_scale,
            headers=headers,
        )

    async def warm_up(self, seconds: float) -> None:
        """A short burst on each arm (not measured): the first requests of a fresh
        engine pay for compilation and caches."""
        names = [s.name for s in self.segments]
        for arm in ("baseline", "spec"):
            self.progress.update(self.task, description=f"warm-up on the {arm} arm")
            gen = self.generator(p.override_headers(dict.fromkeys(names, arm)))
            results = await gen.run(seconds, drain_s=60.0)
            if results and not any(r.ok for r in results):
                raise StartupError(f"warm-up on the {arm} arm: every request failed: {results[0]}")

    async def run(
        self,
        name: str,
        headers: Mapping[str, Mapping[str, str]] | None,
        monitor: Monitor | None = None,
    ) -> list[RequestResult]:
        gen = self.generator(headers)
        load_start = os.getloadavg()[0]
        if monitor is not None:
            monitor.started_wall = time.time()
        traffic = asyncio.create_task(gen.run(self.duration_s))
        try:
            while not traffic.done():
                status = ""
                if monitor is not None:
                    for d in await monitor.sample(gen.elapsed()):
                        if d.from_state != d.to_state:
                            self.progress.console.print(
                                f"  {d.t_s:.0f} s {d.segment}: {d.from_state} → {d.to_state} "
                                f"by {d.actor} ({d.reason})"
                            )
                    status = " — " + ", ".join(
                        f"{seg} {v.state} {v.percentage:g}%" for seg, v in monitor.rollouts.items()
                    )
                dead = [c for c in self.stack.stack.dead_children() if c.name in CORE_CHILDREN]
                if dead:
                    raise StartupError(f"{dead[0].name} died; log tail:\n{dead[0].log_tail()}")
                self.progress.update(
                    self.task,
                    completed=self.done_s + min(gen.elapsed(), self.duration_s),
                    description=f"{name}{status}",
                )
                await asyncio.wait({traffic}, timeout=SAMPLE_S)
            results = await traffic
        finally:
            if not traffic.done():
                traffic.cancel()
                await asyncio.gather(traffic, return_exceptions=True)
        self.done_s += self.duration_s
        self.progress.update(self.task, completed=self.done_s)
        self.shed[name] = {seg: c.shed for seg, c in gen.counters.items()}
        self.load[name] = (load_start, os.getloadavg()[0])
        # NOTE: a line per phase, so a log (no tty, no live bar) shows the progress too.
        self.progress.console.print(
            f"{name}: {sum(r.ok for r in results)} of {len(results)} requests ok, "
            f"{sum(self.shed[name].values())} shed, load {load_start:.1f} → "
            f"{self.load[name][1]:.1f}"
        )
        await asyncio.sleep(PHASE_PAUSE_S)
        return results


async def _all_phases(
    stack: DemoStack, phases: Phases, warmup_s: float
) -> tuple[dict[str, list[RequestResult]], list[p.OracleChoice], Monitor]:
    names = [s.name for s in phases.segments]
    plan = stack.provisioned
    assert plan is not None
    await phases.warm_up(warmup_s)
    out: dict[str, list[RequestResult]] = {}
    for config, arm in ((p.BASELINE, "baseline"), (p.SPECULATION, "spec")):
        out[config] = await phases.run(config, p.override_headers(dict.fromkeys(names, arm)))
    oracle = p.oracle_arms(names, out[p.BASELINE], out[p.SPECULATION])
    phases.progress.update(phases.task, description="starting the rollouts (canary)")
    await asyncio.to_thread(stack.start_rollouts, lambda _message: None)
    monitor = Monitor(
        gateway_url=stack.endpoints.gateway_url,
        control_url=stack.endpoints.control_url,
        admin_token=stack.endpoints.admin_token,
        rollout_segments={rid: seg for seg, rid in plan.rollout_ids.items()},
        started_wall=time.time(),
    )
    try:
        out[p.SPECROUTE] = await phases.run(p.SPECROUTE, None, monitor)
        await asyncio.sleep(SETTLE_S)
        await asyncio.to_thread(stack.stop_automation)
        await monitor.sample(phases.duration_s)
        await write_records(stack.data_dir / "records", monitor.decisions, monitor.record_markdown)
    finally:
        await monitor.close()
    out[p.ORACLE] = await phases.run(
        p.ORACLE, p.override_headers({c.segment: c.arm for c in oracle})
    )
    return out, oracle, monitor


def _write_csv(path: Path, phases: Mapping[str, Sequence[RequestResult]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(
            f, fieldnames=["configuration", *RequestResult.__dataclass_fields__]
        )
        writer.writeheader()
        for name, results in phases.items():
            for r in results:
                writer.writerow({"configuration": name, **asdict(r)})


def report_lines(
    phases: Mapping[str, Sequence[RequestResult]],
    oracle: Sequence[p.OracleChoice],
    conv: p.Convergence,
    duration_s: float,
    shed: Mapping[str, Mapping[str, int]],
    load: Mapping[str, tuple[float, float]],
) -> list[str]:
    """The section's body after its command line: method, oracle, convergence, tables."""
    segments = [c.segment for c in oracle]
    lines = [
        f"Each configuration served the same seeded open-loop schedule of {duration_s:g} s "
        "(the demo's segment mix: Poisson arrivals, prompts and users per segment; arrivals "
        "beyond a segment's concurrency bound are shed) through the same gateway and the "
        "same two pools, one phase after another: *all baseline* and *all speculation* "
        "force every request's arm with the `x-specroute-speculation` override header (no "
        "holdout, no cohorts); *specroute* sends no header: the rollouts start at canary "
        "and the automation decides; *oracle* forces, per segment, the arm with the lower "
        "mean end-to-end time per output token in **this run's** first two phases, and "
        "runs last. e2e ms/token: end-to-end time / output tokens per request; fleet e2e "
        "ms/token: sum of end-to-end times / sum of output tokens; fleet tokens/s: output "
        "tokens of the requests that arrived in the window / the window.",
        "",
        "Oracle (from phases 1 and 2): "
        + "; ".join(
            f"{c.segment} → {c.arm} (baseline {p.fmt(c.baseline_ms)} vs spec "
            f"{p.fmt(c.spec_ms)} ms/token)"
            for c in oracle
        ),
        "",
        "Load average (1 min) at each phase's start → end: "
        + "; ".join(f"{name} {a:.1f} → {b:.1f}" for name, (a, b) in load.items()),
        "",
        "Shed (arrivals over a segment's concurrency bound): "
        + "; ".join(f"{name} {sum(counts.values())}" for name, counts in shed.items() if counts),
        "",
        "specroute's automation: "
        + (
            "; ".join(
                f"{d.segment} {d.from_state} → {d.to_state} {d.to_percentage:g}% at "
                f"{d.t_s:.0f} s ({d.reason})"
                for d in conv.flips
            )
            or "no state change"
        )
        + f". Convergence: {conv.describe()}.",
        "",
    ]
    if conv.last_flip_s is not None and conv.last_flip_s < duration_s:
        start = conv.last_flip_s
        lines += [
            f"### After the last flip (arrivals in [{start:.0f}, {duration_s:g}) s of every "
            "phase's schedule)",
            "",
            *p.goal_lines(phases, start, duration_s),
            p.segment_goal_line(phases, segments, start, duration_s),
            "",
            *p.fleet_table(phases, start, duration_s),
            "",
            *p.segment_table(phases, segments, start, duration_s),
            "",
        ]
    else:
        lines += ["No window after a flip to compare: see the whole phases.", ""]
    lines += [
        f"### Whole phases ([0, {duration_s:g}) s; specroute including its canary)",
        "",
        *p.goal_lines(phases, 0.0, duration_s),
        p.segment_goal_line(phases, segments, 0.0, duration_s),
        "",
        *p.fleet_table(phases, 0.0, duration_s),
        "",
        *p.segment_table(phases, segments, 0.0, duration_s),
        "",
    ]
    return lines


def _summary(
    phases: Mapping[str, Sequence[RequestResult]],
    oracle: Sequence[p.OracleChoice],
    conv: p.Convergence,
    duration_s: float,
    machine: str,
) -> dict[str, object]:
    segments = [c.segment for c in oracle]
    windows = {"whole": 0.0}
    if conv.last_flip_s is not None and conv.last_flip_s < duration_s:
        windows["after_last_flip"] = conv.last_flip_s
    return {
        "duration_s": duration_s,
        "machine": machine,
        "oracle": [asdict(c) for c in oracle],
        "convergence": {
            "last_flip_s": conv.last_flip_s,
            "converged": conv.converged,
            "states": conv.states,
            "flips": [asdict(d) for d in conv.flips],
        },
        "windows": {
            window: {
                "start_s": start,
                "fleet": {
                    n: asdict(p.fleet_stats(r, start, duration_s)) for n, r in phases.items()
                },
                "segments": {
                    n: [asdict(p.segment_stats(r, s, start, duration_s)) for s in segments]
                    for n, r in phases.items()
                },
            }
            for window, start in windows.items()
        },
    }


def policy(
    duration: float = typer.Option(
        240.0, "--duration", min=10.0, help="Seconds of traffic per phase (4 phases)."
    ),
    seed: int = typer.Option(0, "--seed", help="The arrival schedule every phase replays."),
    rate_scale: float = typer.Option(
        1.0, "--rate-scale", min=0.05, help="Multiply every segment's arrival rate."
    ),
    warmup: float = typer.Option(
        10.0, "--warmup", min=0.0, help="Seconds of unmeasured traffic on each arm first."
    ),
    extra_layers: int = typer.Option(
        DEMO_EXTRA_LAYERS, "--extra-layers", min=0, help="Zero-output blocks (0: shipped pair)."
    ),
    users: int | None = typer.Option(
        None,
        "--users",
        min=1,
        help="Distinct users per segment (sticky cohorts: with few, the holdout's share of "
        "requests strays from its percentage); default: the demo's.",
    ),
    holdout: float | None = typer.Option(
        None,
        "--holdout",
        min=0.5,
        max=50.0,
        help="The baseline holdout at full, % of cohorts; default: the threshold set's.",
    ),
    segment_names: list[str] = typer.Option(
        [],
        "--segment",
        help="A demo segment to send (repeat for several); default: every one that names "
        "no LoRA adapter.",
    ),
    data_dir: Path = typer.Option(
        Path("data/bench-policy"), "--data-dir", help="Stack state, logs, CSV, records (wiped)."
    ),
    out_dir: Path = typer.Option(Path("bench/policy"), "--out-dir", help="JSON summary, PNGs."),
    write_results: Path | None = typer.Option(None, "--write-results"),
) -> None:
    """All baseline, all speculation, specroute from canary, and the oracle, on one schedule."""
    segments = choose_segments(segment_names, users)
    started = datetime.now(UTC)
    load_start = os.getloadavg()
    stack = open_stack(data_dir, extra_layers)
    thresholds = None if holdout is None else {**DEMO_THRESHOLDS, "holdout_percentage": holdout}
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop like Ctrl-C
    try:
        with console.status("starting") as status:
            _start(stack, status.update, thresholds, segments)
        with Progress(console=console) as progress:
            phases = Phases(stack, segments, duration, rate_scale, seed, progress)
            results, oracle, monitor = asyncio.run(_all_phases(stack, phases, warmup))
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: stopping every process the run started")
        raise typer.Exit(code=130) from None
    except StartupError as exc:
        console.print(f"[red]{exc}")
        raise typer.Exit(code=1) from exc
    finally:
        # NOTE: a second Ctrl-C (or a SIGTERM) must not cut the clean-up short.
        for sig in handlers:
            signal.signal(sig, signal.SIG_IGN)
        with console.status("stopping") as status:
            stack.stack.stop(on_stop=lambda name: status.update(f"stopping {name}"))
        for sig, handler in handlers.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    machine = load_note(load_start, os.getloadavg())
    names = [c.segment for c in oracle]
    conv = p.convergence(monitor.decisions, names, duration)
    body = report_lines(results, oracle, conv, duration, phases.shed, phases.load)
    console.print("\n".join(body))
    console.print(f"machine: {machine}")
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_csv(data_dir / "report" / "requests.csv", results)
    summary = _summary(results, oracle, conv, duration, machine)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    start = conv.last_flip_s if conv.last_flip_s is not None else 0.0
    pngs = [
        plot_segments(results, names, start, duration, out_dir / "policy_segments.png"),
        plot_tpot(results[p.SPECROUTE], monitor, names, out_dir / "policy_specroute_tpot.png"),
    ]
    for path in [*pngs, out_dir / "summary.json", data_dir / "records"]:
        console.print(f"wrote {path}")
    if write_results is not None:
        command = (
            f"specroute bench policy --duration {duration:g} --seed {seed} "
            f"--rate-scale {rate_scale:g} --warmup {warmup:g} --extra-layers {extra_layers} "
            + (f"--users {users} " if users is not None else "")
            + (f"--holdout {holdout:g} " if holdout is not None else "")
            + "".join(f"--segment {n} " for n in dict.fromkeys(segment_names))
            + f"--write-results {write_results}"
        )
        section = [
            SECTION,
            "",
            f"Command: `{command}` ({started:%Y-%m-%d %H:%M} UTC; {machine}). "
            "Written by the command.",
            "",
            *body,
            *(
                f"![{png.stem}]({png.relative_to(write_results.parent.resolve())})"
                for png in (x.resolve() for x in pngs)
                if png.is_relative_to(write_results.parent.resolve())
            ),
            "",
        ]
        write_section(write_results, "\n".join(section))
        console.print(f"wrote the '{SECTION[3:]}' section of {write_results}")
