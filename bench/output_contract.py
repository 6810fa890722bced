"""`python -m bench.output_contract`: the output-contract guard over many windows.

    python -m bench.output_contract --runs 2000 --windows 1000 --pairs 5 \
        --write-results bench/RESULTS.md

Each run is one rollout's paired checks, `--pairs` per telemetry window for
`--windows` windows: greedy pairs, each unequal with the scenario's probability, or
sampled pairs, each with the spec arm's completion the likelier one with the
scenario's probability (1/2 when lossless); after every window the guard's tests
(`control.automation.contract.contract_guard`: the automation's own function, at the
default threshold set's contract_max_mismatch and contract_sampled_margin and the
contract family's share of its false-alarm budget) read the cumulative counts, as the
guard tick does. A correct pair's runs count false alarms; a broken pair's runs count the
windows until the alarm (detection delay). The counts are simulated, not served: the
real engines' part (a correct tiny pair agrees on every greedy pair; a mis-set sampler
on the spec arm makes most pairs differ, at T=0 and at T > 0) is
tests/gateway/test_pair_check_vllm.py.
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
from control.models import ThresholdSet
from control.stats.sequential import rate_log_evidence
from specwire import OutputContractCounts

SECTION = "## Output contract in production"


@dataclass(frozen=True)
class Scenario:
    name: str
    # greedy: the chance that one pair differs; sampled: that the spec arm's is likelier
    mismatch: float
    broken: bool  # True: the guard should alarm
    sampled: bool = False


SCENARIOS = (
    Scenario("correct pair, no mismatch (as the real tiny pair)", 0.0, False),
    Scenario("correct pair at the allowed rate (worst case null)", 0.01, False),
    Scenario("correct pair at half the allowed rate", 0.005, False),
    Scenario("broken: sampler mis-set on the spec arm (most pairs differ)", 0.9, True),
    Scenario("broken: 20 % of pairs differ", 0.2, True),
    Scenario("broken: 5 % of pairs differ", 0.05, True),
    Scenario("broken: 3 % of pairs differ", 0.03, True),
    Scenario("T > 0, correct pair (spec likelier in half the pairs)", 0.5, False, True),
    Scenario("T > 0, correct pair at the margin's edge (worst case null)", 0.65, False, True),
    Scenario("T > 0, broken: spec likelier in 95 % (sampler too cold)", 0.95, True, True),
    Scenario("T > 0, broken: spec likelier in 85 %", 0.85, True, True),
    Scenario("T > 0, broken: spec less likely in 80 %", 0.2, True, True),
)


@dataclass(frozen=True)
class Row:
    scenario: Scenario
    runs: int
    alarms: int
    delays: list[int]  # windows until the alarm, per alarmed run


def thresholds() -> ThresholdSet:
    # The API's defaults (control/thresholds/schemas.py).
    return ThresholdSet(
        contract_max_mismatch=0.01, contract_sampled_margin=0.15, false_alarm_rate=0.01
    )


def run(scenario: Scenario, *, runs: int, windows: int, pairs: int, seed: int) -> Row:
    t = thresholds()
    alpha = family_alpha(t)
    rng = np.random.default_rng(seed)
    hits = rng.binomial(pairs, scenario.mismatch, size=(runs, windows)).cumsum(axis=1)
    trials = np.broadcast_to(np.arange(1, windows + 1) * pairs, hits.shape)
    if scenario.sampled:
        # Either direction at a quarter of the family's share (the guard's split).
        allowed = 0.5 + t.contract_sampled_margin
        bound = math.log(4 / alpha)
        alarmed = (rate_log_evidence(hits, trials, allowed) >= bound) | (
            rate_log_evidence(trials - hits, trials, allowed) >= bound
        )
    else:
        alarmed = rate_log_evidence(hits, trials, t.contract_max_mismatch) >= math.log(2 / alpha)
    first = np.where(alarmed.any(axis=1), alarmed.argmax(axis=1) + 1, 0)
    # The vectorised test is the guard's own: check it on the first run, window by window.
    per_window = [int(h) for h in np.diff(hits[0], prepend=0)[: first[0] or 50]]
    counts = [
        OutputContractCounts(sampled_spec_higher=h, sampled_spec_lower=pairs - h)
        if scenario.sampled
        else OutputContractCounts(pairs=pairs, equal=pairs - h)
        for h in per_window
    ]
    guard = contract_guard(counts, t, alpha)
    assert guard is not None and guard.alarm == bool(first[0]), (guard, first[0])
    return Row(scenario, runs, int((first > 0).sum()), [int(d) for d in first[first > 0]])


def _delay(row: Row) -> str:
    if not row.delays:
        return "—"
    d = sorted(row.delays)
    p95 = d[min(len(d) - 1, math.ceil(0.95 * len(d)) - 1)]
    return f"median {statistics.median(d):g}, p95 {p95}, max {d[-1]}"


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| scenario | mismatch rate (T > 0: spec likelier) | runs | alarms | false alarms "
        "| detection delay (windows) |",
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
        f"checks per window; contract_max_mismatch {t.contract_max_mismatch:g}, "
        f"contract_sampled_margin {t.contract_sampled_margin:g}, contract family alpha "
        f"{family_alpha(t):g} (false_alarm_rate {t.false_alarm_rate:g} / 5 families): "
        f"the greedy test at half of it, each sampled direction at a quarter."
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
