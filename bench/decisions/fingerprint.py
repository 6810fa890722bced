"""`python -m bench.decisions.fingerprint`: every run's whole outcome, one JSON line each.

    python -m bench.decisions.fingerprint --runs 2 --workers 1,4,8,16 > after.jsonl

For a change meant to leave verdicts alone (a renovation): run it on the tree before
and the tree after and compare the files (`cmp`). A line holds every field of the
run's RunResult: each flip's action, second, windows ingested, kind and reason text,
the final state and the last evaluation's interval, so it shows what the summary
table (rates and delays) can hide. Runs go one after the other in this process
(seeded, on the virtual clock, so the output does not depend on the machine's load).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import TextIO

from bench.decisions.dispatch import Dispatch
from bench.decisions.scenarios import SCENARIOS
from bench.decisions.suite import run_many


def fingerprint(
    scenarios: Sequence[str],
    runs: int,
    workers: Sequence[int],
    dispatches: Sequence[Dispatch] = (Dispatch.BALANCER,),
    *,
    seed: int = 0,
    out: TextIO = sys.stdout,
) -> int:
    """Write one sorted-key JSON line per run, in (scenario, workers, dispatch, seed)
    order; return the number of lines."""
    results = run_many(scenarios, runs, workers=workers, dispatches=dispatches, seed=seed)
    lines = 0
    for key in sorted(results):
        for result in sorted(results[key], key=lambda r: r.seed):
            out.write(json.dumps(dataclasses.asdict(result), sort_keys=True, default=str) + "\n")
            lines += 1
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    names = [s.name for s in SCENARIOS]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scenarios", default=",".join(names), help="comma-separated (default: all)")
    p.add_argument("--runs", type=int, default=2, help="seeds per row")
    p.add_argument("--workers", default="1,4,8,16", help="comma-separated workers per pool")
    p.add_argument("--dispatch", default=Dispatch.BALANCER.value, help="balancer and/or random")
    p.add_argument("--seed", type=int, default=0, help="first seed")
    a = p.parse_args(argv)
    chosen = [n for n in a.scenarios.split(",") if n]
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        p.error(f"unknown scenarios: {', '.join(unknown)} (known: {', '.join(names)})")
    try:
        workers = [int(w) for w in a.workers.split(",")]
        dispatches = [Dispatch(d) for d in a.dispatch.split(",")]
    except ValueError as exc:
        p.error(str(exc))
    lines = fingerprint(chosen, a.runs, workers, dispatches, seed=a.seed)
    print(f"{lines} runs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
