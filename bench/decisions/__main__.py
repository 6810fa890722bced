"""`python -m bench.decisions`: run the decision scenario suite and report.

    python -m bench.decisions --runs 50 --scenario-runs null=200,heavy_null=200,good=200 \
        --jobs 2 --workers 1,4,8,16 --write-results bench/RESULTS.md

prints one progress line per finished run and a table with one row per
(scenario, workers per pool, dispatch): runs, right-action rate, wrong disables
or rollbacks, wrong promotions, the detection delay (windows of regressed
traffic ingested when the regression was rolled back or disabled) with its
distribution and the share caught within 3 windows, and, where the true speedup
is known, how often the last evaluation's interval covered it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from bench.decisions.dispatch import Dispatch
from bench.decisions.judge import DETECT_WITHIN
from bench.decisions.scenarios import CATALOGS, FLEET, PROFILES, with_workers
from bench.decisions.suite import (
    Key,
    Summary,
    default_jobs,
    delay_cell,
    elapsed,
    run_many,
    summarize,
)

SECTION = "## Decision quality"


def _share(count: int | None, runs: int) -> str:
    return "" if count is None or not runs else f"{count}/{runs} ({count / runs:.0%})"


def _label(s: Summary) -> str:
    return f"{s.scenario.name} ({s.workers} workers, {s.dispatch})"


def _table(summaries: list[Summary]) -> list[str]:
    lines = [
        "| scenario | workers | dispatch | runs | right | wrong disable/rollback | "
        f"wrong promotion | detection delay (windows) | within {DETECT_WITHIN} windows | "
        "interval covers the true speedup | what went wrong |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for s in summaries:
        covers = _share(s.covered, s.runs)
        if covers and s.no_interval:
            covers += f"; {s.no_interval} without one"
        lines.append(
            f"| {s.scenario.name} | {s.workers} | {s.dispatch} | {s.runs} | {s.right_rate:.1%} | "
            f"{s.false_flips} | {s.promotions_wrong} | {delay_cell(s.delays)} | "
            f"{_share(s.within, s.runs)} | {covers} | {s.reaction_note} |"
        )
    return lines


def _guard_costs(summaries: list[Summary]) -> list[str]:
    lines = [
        "| guard (scenario) | flips | windows to act: median | p90 | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for s in summaries:
        if not s.delays:
            continue
        d = s.delays
        lines.append(
            f"| {s.guard} ({_label(s)}) | {len(d)} | {statistics.median(d):g} | "
            f"{d[min(len(d) - 1, int(0.9 * len(d)))]} | {d[-1]} |"
        )
    return lines


def _distributions(summaries: list[Summary]) -> list[str]:
    lines = []
    for s in summaries:
        if not s.delays:
            continue
        counts = Counter(s.delays)
        cells = ", ".join(f"{d}: {counts[d]}" for d in sorted(counts))
        lines.append(f"- {_label(s)}: {cells}")
    return lines


def _section(
    summaries: list[Summary],
    command: str,
    started: datetime,
    seconds: float,
    profile: str,
    start: str = "canary",
) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    described = {s.scenario.name: s.scenario.description for s in summaries}
    scenarios = "\n".join(f"- **{name}**: {text}." for name, text in described.items())
    return "\n".join(
        [
            SECTION,
            "",
            f"Command: `{command}` ({started:%Y-%m-%d %H:%M} UTC, {seconds:.0f} s, load "
            f"average {load:.1f} at the end). Every run drives the real control plane "
            "(telemetry ingestion, heartbeats, the real Celery tasks applied in-process) on "
            "a virtual clock with the production cadence: 10 s windows, guards every 15 s, "
            f"evaluation every 60 s; the {profile} traffic profile; rollouts start at "
            + ("the canary" if start == "canary" else "full (an admin promotes them first)")
            + ". Dispatch `balancer`: "
            "every request through the gateway's own least-outstanding balancer "
            "(gateway.routing.balancer) in continuous time, counted in the window it ends "
            "in; `random`: each request's load drawn as Poisson around the pool's "
            "per-worker concurrency. Scenarios (bench/decisions/scenarios.py):",
            "",
            scenarios,
            "",
            *_table(summaries),
            "",
            "Detection delay: telemetry windows of regressed traffic the control plane had "
            "ingested when the rollout was rolled back or disabled (guards run every 15 s "
            "and when a batch lands); drift: from the window the spec crosses the latency "
            "margin (0 or less: caught before). Distribution (delay: runs):",
            "",
            *_distributions(summaries),
            "",
            "What each guard costs, in windows from the onset of the problem (weak pair: "
            "from the start of the canary) to the flip, over the runs where it acted:",
            "",
            *_guard_costs(summaries),
            "",
        ]
    )


def write_section(path: Path, section: str) -> None:
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    start = text.find(SECTION)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + section.rstrip("\n") + ("\n" + text[end:] if end >= 0 else "\n")
    path.write_text(text)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decisions", description=__doc__)
    parser.add_argument("--runs", type=int, default=200, help="runs per row")
    parser.add_argument(
        "--scenario-runs",
        default="",
        help="comma-separated NAME=RUNS: runs per row of those scenarios (default: --runs)",
    )
    parser.add_argument(
        "--traffic",
        choices=sorted(PROFILES),
        default=FLEET.name,
        help="traffic profile (bench/decisions/scenarios.py; legacy: 40 workers per pool)",
    )
    parser.add_argument("--scenarios", help="comma-separated names (default: all)")
    parser.add_argument(
        "--workers",
        type=_ints,
        help="comma-separated workers per pool, e.g. 1,4,8,16 (default: the profile's)",
    )
    parser.add_argument(
        "--dispatch",
        default=Dispatch.BALANCER.value,
        help="comma-separated: balancer (the gateway's balancer), random (Poisson load)",
    )
    parser.add_argument(
        "--start",
        choices=["canary", "full"],
        default="canary",
        help="full: an admin takes each rollout to full before its first window, so the "
        "monitors after full are measured whatever the canary's verdicts",
    )
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="worker processes")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--write-results", type=Path, help="write the section into this file")
    args = parser.parse_args(argv)
    profile = PROFILES[args.traffic]
    scenarios = CATALOGS[profile.name]
    names = [n.strip() for n in (args.scenarios or ",".join(scenarios)).split(",") if n.strip()]
    unknown = [n for n in names if n not in scenarios]
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {sorted(scenarios)}")
    runs = {name: args.runs for name in names}
    for item in (x.strip() for x in args.scenario_runs.split(",") if x.strip()):
        name, _, value = item.partition("=")
        if name not in runs or not value.isdigit() or int(value) < 1:
            parser.error(f"--scenario-runs: {item!r} is not NAME=RUNS of a chosen scenario")
        runs[name] = int(value)
    try:
        dispatches = [Dispatch(d.strip()) for d in args.dispatch.split(",") if d.strip()]
    except ValueError:
        parser.error(f"--dispatch: one of {[d.value for d in Dispatch]}")
    workers = args.workers or list(profile.workers)
    if not workers or min(workers) < 1:
        parser.error("--workers: one or more pool sizes >= 1")
    started, clock = datetime.now(UTC), time.monotonic()

    def progress(key: Key, done: int, total: int, right: int) -> None:
        name, n, dispatch = key
        print(
            f"[{elapsed(clock)}] {name} ({n} workers, {dispatch}): {done}/{total} runs, "
            f"{right} right",
            flush=True,
        )

    results = run_many(
        names,
        runs,
        workers=workers,
        dispatches=dispatches,
        profile=profile.name,
        jobs=args.jobs,
        seed=args.seed,
        start_full=args.start == "full",
        progress=progress,
    )
    summaries = [
        summarize(with_workers(scenarios[name], n), results[(name, n, d.value)], dispatch=d.value)
        for name in names
        for n in workers
        for d in dispatches
    ]
    command = "python -m bench.decisions " + " ".join(sys.argv[1:] if argv is None else argv)
    section = _section(summaries, command.strip(), started, time.monotonic() - clock, profile.name)
    print()
    print(section)
    if args.write_results is not None:
        write_section(args.write_results, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
