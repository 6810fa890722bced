"""`python -m bench.decisions`: run the decision scenario suite and report.

    python -m bench.decisions --runs 200 --jobs 2 --write-results bench/RESULTS.md

prints one progress line per finished run and a table per scenario: runs,
right-action rate, wrong disables or rollbacks, wrong promotions, and the
detection delay (windows of regressed traffic ingested when the regression
was rolled back or disabled) with its distribution.
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

from bench.decisions.scenarios import BY_NAME, SCENARIOS
from bench.decisions.suite import Summary, default_jobs, delay_cell, elapsed, run_many, summarize

SECTION = "## Decision quality"


def _table(summaries: list[Summary]) -> list[str]:
    lines = [
        "| scenario | runs | right | wrong disable/rollback | wrong promotion | "
        "detection delay (windows) | what went wrong |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for s in summaries:
        lines.append(
            f"| {s.scenario.name} | {s.runs} | {s.right_rate:.1%} | {s.false_flips} | "
            f"{s.promotions_wrong} | {delay_cell(s.delays)} | {s.reaction_note} |"
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
            f"| {s.guard} ({s.scenario.name}) | {len(d)} | {statistics.median(d):g} | "
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
        lines.append(f"- {s.scenario.name}: {cells}")
    return lines


def _section(summaries: list[Summary], command: str, started: datetime, seconds: float) -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    scenarios = "\n".join(f"- **{s.scenario.name}**: {s.scenario.description}." for s in summaries)
    return "\n".join(
        [
            SECTION,
            "",
            f"Command: `{command}` ({started:%Y-%m-%d %H:%M} UTC, {seconds:.0f} s, load "
            f"average {load:.1f} at the end). Every run drives the real control plane "
            "(telemetry ingestion, heartbeats, the real Celery tasks applied in-process) on "
            "a virtual clock with the production cadence: 10 s windows, guards every 15 s, "
            "evaluation every 60 s. Scenarios (bench/decisions/scenarios.py):",
            "",
            scenarios,
            "",
            *_table(summaries),
            "",
            "Detection delay: telemetry windows of regressed traffic the control plane had "
            "ingested when the rollout was rolled back or disabled (guards run every 15 s "
            "and when a batch lands). Distribution (delay: runs):",
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decisions", description=__doc__)
    parser.add_argument("--runs", type=int, default=200, help="runs per scenario")
    parser.add_argument(
        "--scenarios",
        default=",".join(s.name for s in SCENARIOS),
        help="comma-separated names (default: all)",
    )
    parser.add_argument("--jobs", type=int, default=default_jobs(), help="worker processes")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--write-results", type=Path, help="write the section into this file")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {sorted(BY_NAME)}")
    scenarios = [BY_NAME[n] for n in names]
    started, clock = datetime.now(UTC), time.monotonic()

    def progress(name: str, done: int, total: int, right: int) -> None:
        print(f"[{elapsed(clock)}] {name}: {done}/{total} runs, {right} right", flush=True)

    results = run_many(scenarios, args.runs, jobs=args.jobs, seed=args.seed, progress=progress)
    summaries = [summarize(s, results[s.name]) for s in scenarios]
    command = "python -m bench.decisions " + " ".join(sys.argv[1:] if argv is None else argv)
    section = _section(summaries, command.strip(), started, time.monotonic() - clock)
    print()
    print(section)
    if args.write_results is not None:
        write_section(args.write_results, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
