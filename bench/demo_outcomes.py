"""`specroute bench demo-outcomes`: how often a default `make demo` shows both outcomes.

    specroute bench demo-outcomes --runs 5 --write-results bench/RESULTS.md

Runs `specroute demo` (its defaults, or the options after `--`) N times, one after
another, each in its own data directory, reads each run's report/summary.json and
counts the runs that promoted a segment to full, the runs that rolled back or
disabled one, and the runs that did both (issue #11's goal: both in 4 of 5 runs on
an idle machine). With --write-results it replaces the "Demo outcomes" section of
bench/RESULTS.md with the table, the load average of every run and the command.
"""

import json
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from bench.results import write_section
from demo.stack import specroute_exe

SECTION = "## Demo outcomes"
console = Console()

# State changes by the automation, by what they mean for the segment.
PROMOTED = ("full",)
TURNED_OFF = ("rolled_back", "disabled")


@dataclass(frozen=True)
class Change:
    segment: str
    to_state: str
    kind: str
    t_s: float
    reason: str


@dataclass(frozen=True)
class RunOutcome:
    run: int
    load_start: float | None
    load_end: float | None
    changes: tuple[Change, ...]
    tpot_ms: dict[str, tuple[float | None, float | None]]  # segment -> (spec, baseline)
    error: str | None = None

    def changes_to(self, states: tuple[str, ...]) -> list[Change]:
        return [c for c in self.changes if c.to_state in states]

    @property
    def promoted(self) -> bool:
        return bool(self.changes_to(PROMOTED))

    @property
    def turned_off(self) -> bool:
        return bool(self.changes_to(TURNED_OFF))


def outcome_of(run: int, summary: dict[str, Any]) -> RunOutcome:
    """What one demo run's summary.json says the automation did."""
    changes = tuple(
        Change(d["segment"], d["to_state"], d["kind"], float(d["t_s"]), d["reason"])
        for d in summary.get("decisions", [])
        if d.get("actor") == "automation" and d["from_state"] != d["to_state"]
    )
    machine = summary.get("machine", {})
    tpot = {
        s["segment"]: (s.get("tpot_spec_ms"), s.get("tpot_baseline_ms"))
        for s in summary.get("segments", [])
    }
    return RunOutcome(run, machine.get("load_start"), machine.get("load_end"), changes, tpot)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _load(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def _listing(changes: list[Change]) -> str:
    return "; ".join(f"{c.segment} at {c.t_s:.0f} s ({c.kind})" for c in changes) or "none"


def section(outcomes: list[RunOutcome], command: str, started: datetime) -> str:
    done = [o for o in outcomes if o.error is None]
    both = sum(o.promoted and o.turned_off for o in done)
    lines = [
        SECTION,
        "",
        f"Command: `{command}` ({started:%Y-%m-%d %H:%M} UTC). Written by the command: each "
        "run is a default `specroute demo` (= `make demo`) in its own data directory; "
        "outcomes are the automation's state changes from the run's report/summary.json.",
        "",
        f"- runs that promoted a segment to full: {sum(o.promoted for o in done)} of {len(done)}",
        f"- runs that rolled back or disabled a segment: "
        f"{sum(o.turned_off for o in done)} of {len(done)}",
        f"- **both in one run: {both} of {len(done)}** (goal: 4 of 5 on an idle machine)",
    ]
    failed = [o for o in outcomes if o.error is not None]
    if failed:
        lines.append(f"- runs that failed: {', '.join(f'{o.run} ({o.error})' for o in failed)}")
    lines += [
        "",
        "| run | load avg start / end | promoted to full | rolled back / disabled | paused "
        "| TPOT spec/base ms per segment |",
        "|---:|---|---|---|---|---|",
    ]
    for o in done:
        tpot = ", ".join(f"{seg} {_ms(s)}/{_ms(b)}" for seg, (s, b) in o.tpot_ms.items())
        lines.append(
            f"| {o.run} | {_load(o.load_start)} / {_load(o.load_end)} "
            f"| {_listing(o.changes_to(PROMOTED))} | {_listing(o.changes_to(TURNED_OFF))} "
            f"| {_listing(o.changes_to(('paused',)))} | {tpot} |"
        )
    reasons = [(o.run, c) for o in done for c in o.changes_to(PROMOTED + TURNED_OFF)]
    if reasons:
        lines += ["", "Reasons, as the decision rows state them:", ""]
        lines += [f"- run {run}, {c.segment} → {c.to_state}: {c.reason}" for run, c in reasons]
    return "\n".join(lines) + "\n"


def run_demo(data_dir: Path, demo_args: list[str]) -> str | None:
    """One `specroute demo`; its output goes to data_dir.parent/<name>.log. The error, or None."""
    log = data_dir.parent / f"{data_dir.name}.log"
    command = [*specroute_exe(), "demo", "--data-dir", str(data_dir)]
    with log.open("w") as out:
        done = subprocess.run([*command, *demo_args], stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        return f"exit {done.returncode}, see {log}"
    if not (data_dir / "report" / "summary.json").exists():
        return f"no report/summary.json, see {log}"
    return None


def demo_outcomes(
    ctx: typer.Context,
    runs: int = typer.Option(5, "--runs", min=1, max=50),
    data_root: Path = typer.Option(
        Path("data/demo-outcomes"), "--data-root", help="One data directory per run below it."
    ),
    write_results: Path | None = typer.Option(None, "--write-results"),
) -> None:
    """Run the demo N times and count the runs that promote and turn off a segment.
    Options after `--` go to every `specroute demo`."""
    started = datetime.now(UTC)
    demo_args = list(ctx.args)
    data_root.mkdir(parents=True, exist_ok=True)
    outcomes = []
    for run in range(1, runs + 1):
        data_dir = data_root / f"run-{run}"
        console.print(f"[bold]run {run} of {runs}[/]: specroute demo --data-dir {data_dir}")
        error = run_demo(data_dir, demo_args)
        if error is not None:
            outcomes.append(RunOutcome(run, None, None, (), {}, error))
            console.print(f"  [red]failed[/]: {error}")
            continue
        summary = json.loads((data_dir / "report" / "summary.json").read_text())
        outcome = outcome_of(run, summary)
        outcomes.append(outcome)
        console.print(
            f"  promoted: {_listing(outcome.changes_to(PROMOTED))}; turned off: "
            f"{_listing(outcome.changes_to(TURNED_OFF))}; load "
            f"{_load(outcome.load_start)} -> {_load(outcome.load_end)}"
        )
    command = " ".join(["specroute bench demo-outcomes", f"--runs {runs}", *demo_args])
    text = section(outcomes, command, started)
    console.print(text)
    if write_results is not None:
        write_section(write_results, text)
        console.print(f"wrote the '{SECTION[3:]}' section of {write_results}")
    if any(o.error is not None for o in outcomes):
        raise typer.Exit(1)
