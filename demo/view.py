"""What the demo shows while traffic runs: on a terminal, a live table redrawn
twice a second; piped to a file (or any non-terminal), plain timestamped lines,
one per segment every PLAIN_EVERY_S and one per decision as it lands, that no
width cuts or wraps."""

import statistics
import time
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from demo.monitor import DecisionEvent, Monitor, mean_acceptance_length
from demo.traffic import TrafficGenerator

# The live view's spec share is over the requests started in the last RECENT_S
# seconds, so it drops to 0 % after a disable instead of decaying slowly.
RECENT_S = 15.0
PLAIN_EVERY_S = 10.0
PIPE_WIDTH = 1000  # a non-terminal gets rich's 80 columns otherwise: tables fold, text wraps


def make_console() -> Console:
    """The demo's console: a terminal's own width, or no practical limit in a pipe."""
    probe = Console()
    if probe.is_terminal:
        return probe
    return Console(width=PIPE_WIDTH, soft_wrap=True)


def stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Segment:
    name: str
    sent: int
    ok: int
    errors: int
    shed: int
    in_flight: int
    spec_share: str
    tau: str
    tpot: str
    rollout: str


def segment_rows(gen: TrafficGenerator, monitor: Monitor) -> list[Segment]:
    rows_out = []
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
        rows_out.append(
            Segment(
                seg.name,
                counters.sent,
                len(ok),
                len(rows) - len(ok),
                counters.shed,
                counters.in_flight,
                f"{len(spec_recent) / len(recent):.0%}" if recent else "-",
                f"{tau:.2f}" if tau is not None else "-",
                " / ".join(
                    f"{statistics.median(v):.1f}" if v else "-"
                    for v in (tpot["spec"], tpot["baseline"])
                ),
                f"{view.state} {view.percentage:g}%" if view else "?",
            )
        )
    return rows_out


def live_view(gen: TrafficGenerator, monitor: Monitor, duration_s: float) -> Group:
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
    for s in segment_rows(gen, monitor):
        table.add_row(
            s.name,
            str(s.sent),
            str(s.ok),
            str(s.errors),
            str(s.shed),
            str(s.in_flight),
            s.spec_share,
            s.tau,
            s.tpot,
            s.rollout,
        )
    lines = [decision_line(d) for d in monitor.decisions[-8:]]
    footer = Text("\n".join(lines) if lines else "no decisions yet", style="cyan")
    parts: list[Table | Text] = [table, Text("decisions (newest last):", style="bold"), footer]
    if monitor.last_error:
        parts.append(Text(monitor.last_error, style="yellow"))
    return Group(*parts)


def decision_line(d: DecisionEvent) -> str:
    return (
        f"#{d.id} t={d.t_s:5.0f}s {d.segment}: {d.kind} {d.from_state}→{d.to_state} "
        f"{d.to_percentage:g}% by {d.actor} — {d.reason}"
    )


@dataclass
class PlainLines:
    """The piped form of the live view: call `update` as often as the live view."""

    console: Console
    duration_s: float
    printed_at: float = -PLAIN_EVERY_S
    decisions_seen: set[int] = field(default_factory=set)
    last_error: str | None = None

    def update(self, gen: TrafficGenerator, monitor: Monitor, *, final: bool = False) -> None:
        for d in monitor.decisions:
            if d.id not in self.decisions_seen:
                self.decisions_seen.add(d.id)
                self.console.print(f"{stamp()} decision {decision_line(d)}", markup=False)
        if monitor.last_error and monitor.last_error != self.last_error:
            self.console.print(f"{stamp()} monitor: {monitor.last_error}", markup=False)
        self.last_error = monitor.last_error
        elapsed = gen.elapsed()
        if not final and elapsed - self.printed_at < PLAIN_EVERY_S:
            return
        self.printed_at = elapsed
        for s in segment_rows(gen, monitor):
            self.console.print(
                f"{stamp()} t={elapsed:.0f}/{self.duration_s:.0f}s {s.name}: sent {s.sent}, "
                f"ok {s.ok}, errors {s.errors}, shed {s.shed}, in flight {s.in_flight}, "
                f"spec share ({RECENT_S:g} s) {s.spec_share}, accept. len {s.tau}, "
                f"TPOT spec/base ms {s.tpot}, rollout {s.rollout}",
                markup=False,
            )
