"""`python -m bench.output_contract`: the output-contract guard over many windows.

    python -m bench.output_contract --runs 2000 --windows 1000 --pairs 5 \
        --write-results bench/RESULTS.md

Each run is one rollout's paired greedy checks, `--pairs` per telemetry window for
`--windows` windows, each pair unequal with the scenario's probability; after every
window the guard's test (`control.automation.contract.contract_guard`: the automation's
own function, at the default threshold set's contract_max_mismatch and the contract
family's share of its false-alarm budget) reads the cumulative counts, as the guard
tick does. A correct pair's runs count false alarms; a broken pair's runs count the
windows until the alarm (detection delay). The counts are simulated, not served: the
real engines' part (a correct tiny pair agrees on every greedy pair; a mis-set sampler
on the spec arm makes most pairs differ) is tests/gateway/test_pair_check_vllm.py.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.results import write_section
from control.automation.budget import family_alpha
from control.automation.contract import contract_guard
from control.contract import OutputContractCounts
from control.models import ThresholdSet
from control.stats.sequential import rate_log_evidence

SECTION = "## Output contract in production"


@dataclass(frozen=True)
class Scenario:
    name: str
    mismatch: float  # the chance that one greedy pair differs
    broken: bool  # True: the guard should alarm


SCENARIOS = (
    Scenario("correct pair, no mismatch (as the real tiny pair)", 0.0, False),
    Scenario("correct pair at the allowed rate (worst case null)", 0.01, False),
    Scenario("correct pair at half the allowed rate", 0.005, False),
    Scenario("broken: sampler mis-set on the spec arm (most pairs differ)", 0.9, True),
    Scenario("broken: 20 % of pairs differ", 0.2, True),
    Scenario("broken: 5 % of pairs differ", 0.05, True),
    Scenario("broken: 3 % of pairs differ", 0.03, True),
)


@dataclass(frozen=True)
class Row:
    scenario: Scenario
    runs: int
    alarms: int
    delays: list[int]  # windows until the alarm, per alarmed run


def thresholds() -> ThresholdSet:
    # The API's defaults (control/thresholds/schemas.py).
    return ThresholdSet(contract_max_mismatch=0.01, false_alarm_rate=0.01)


def run(scenario: Scenario, *, runs: int, windows: int, pairs: int, seed: int) -> Row:
    t = thresholds()
    alpha = family_alpha(t)
    rng = np.random.default_rng(seed)
    unequal = rng.binomial(pairs, scenario.mismatch, size=(runs, windows)).cumsum(axis=1)
    trials = np.broadcast_to(np.arange(1, windows + 1) * pairs, unequal.shape)
    alarmed = rate_log_evidence(unequal, trials, t.contract_max_mismatch) >= math.log(1 / alpha)
    first = np.where(alarmed.any(axis=1), alarmed.argmax(axis=1) + 1, 0)
    # The vectorised test is the guard's own: check it on the first run, window by window.
    per_window = np.diff(unequal[0], prepend=0)
    counts = [
        OutputContractCounts(pairs=pairs, equal=pairs - int(u))
        for u in per_window[: first[0] or 50]
    ]
    guard = contract_guard(counts, t, alpha)
    assert guard is not None and guard.test.alarm == bool(first[0]), (guard, first[0])
    return Row(scenario, runs, int((first > 0).sum()), [int(d) for d in first[first > 0]])


def _delay(row: Row) -> str:
    if not row.delays:
        return "—"
    d = sorted(row.delays)
    p95 = d[min(len(d) - 1, math.ceil(0.95 * len(d)) - 1)]
    return f"median {statistics.median(d):g}, p95 {p95}, max {d[-1]}"


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| scenario | mismatch rate | runs | alarms | false alarms | detection delay (windows) |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        s = r.scenario
        false = "" if s.broken else f"{r.alarms}/{r.runs} ({r.alarms / r.runs:.2%})"
        caught = f"{r.alarms}/{r.runs}"
        lines.append(
            f"| {s.name} | {s.mismatch:.1%} | {r.runs} | {caught} | {false} | "
            f"{_delay(r) if s.broken else '—'} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.output_contract")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--windows", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=5, help="paired checks per window")
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--write-results", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.windows < 1 or args.pairs < 1:
        parser.error("--runs, --windows and --pairs must be at least 1")
    rows = [
        run(s, runs=args.runs, windows=args.windows, pairs=args.pairs, seed=args.seed + i)
        for i, s in enumerate(SCENARIOS)
    ]
    t = thresholds()
    lines = table(rows)
    header = (
        f"{args.runs} runs per scenario, {args.windows} windows each, {args.pairs} paired "
        f"greedy checks per window; contract_max_mismatch {t.contract_max_mismatch:g}, "
        f"alpha {family_alpha(t):g} (false_alarm_rate {t.false_alarm_rate:g} / 5 families)."
    )
    print(header)
    print("\n".join(lines))
    if args.write_results is not None:
        body = [
            SECTION,
            "",
            "Command: `python -m bench.output_contract --runs "
            f"{args.runs} --windows {args.windows} --pairs {args.pairs} --write-results "
            "bench/RESULTS.md` (seconds). " + header,
            "",
            "Simulated pair outcomes judged by the automation's own guard function (see the "
            "module docstring); the real engines' half of the proof is "
            "`tests/gateway/test_pair_check_vllm.py` (next section).",
            "",
            *lines,
            "",
        ]
        write_section(args.write_results, "\n".join(body))
    return 0


if __name__ == "__main__":
    sys.exit(main())
