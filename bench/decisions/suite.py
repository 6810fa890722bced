"""Run scenarios many times (in worker processes) and summarize what the automation did.

Each worker process has its own SQLite database (migrated with the real
migrations, on /dev/shm when it exists) and its own automation app; a fresh
database every `RUNS_PER_DATABASE` runs keeps queries at production size.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.decisions.dispatch import Dispatch
from bench.decisions.judge import DETECT_WITHIN, RunResult
from bench.decisions.runner import HEARTBEAT_EVERY, run_scenario
from bench.decisions.scenarios import CATALOGS, FLEET, Expect, Scenario, with_workers
from control.automation.app import create_celery_app
from control.automation.celery_app import AutomationCelery
from control.migrate import upgrade
from control.settings import ControlSettings

RUNS_PER_DATABASE = 40
# Heartbeats arrive every HEARTBEAT_EVERY windows in a simulation (see runner.py).
STALE_AFTER_S = HEARTBEAT_EVERY * 10 + 15

_app: AutomationCelery | None = None
_runs_on_app = 0


def simulation_app(directory: Path | None = None) -> AutomationCelery:
    """A migrated SQLite database and an automation app on it (tasks applied eagerly)."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    data_dir = directory or Path(tempfile.mkdtemp(prefix="specroute-decisions-", dir=base))
    url = f"sqlite:///{data_dir / 'control.db'}"
    upgrade(url)
    settings = ControlSettings(
        data_dir=data_dir, database_url=url, worker_stale_after_s=STALE_AFTER_S
    )
    return create_celery_app(settings)


@dataclass(frozen=True)
class Job:
    """One run: a scenario of a traffic profile, on pools of `workers`, one dispatch."""

    profile: str
    scenario: str
    workers: int
    dispatch: Dispatch
    seed: int
    start_full: bool = False

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.scenario, self.workers, self.dispatch.value)


def _worker_run(job: Job) -> RunResult:
    global _app, _runs_on_app
    if _app is None or _runs_on_app >= RUNS_PER_DATABASE:
        if _app is not None:
            _app.database.dispose()
        _app, _runs_on_app = simulation_app(), 0
    _runs_on_app += 1
    scenario = with_workers(CATALOGS[job.profile][job.scenario], job.workers)
    return run_scenario(_app, scenario, job.seed, job.dispatch, start_full=job.start_full)


def _quiet() -> None:
    logging.disable(logging.WARNING)


Key = tuple[str, int, str]  # scenario, workers per pool, dispatch


def run_many(
    scenarios: Sequence[str],
    runs: int | Mapping[str, int],
    *,
    workers: Sequence[int] = (4,),
    dispatches: Sequence[Dispatch] = (Dispatch.BALANCER,),
    profile: str = FLEET.name,
    jobs: int = 1,
    seed: int = 0,
    start_full: bool = False,
    progress: Callable[[Key, int, int, int], None] | None = None,
) -> dict[Key, list[RunResult]]:
    """`runs` runs (seeds seed..seed+runs-1; a mapping: per scenario) of each scenario
    at each pool size and dispatch, in `jobs` processes; results by (scenario, workers,
    dispatch)."""
    count = {name: runs if isinstance(runs, int) else runs[name] for name in scenarios}
    work = [
        Job(profile, name, n, d, seed + i, start_full)
        for name in scenarios
        for n in workers
        for d in dispatches
        for i in range(count[name])
    ]
    results: dict[Key, list[RunResult]] = {job.key: [] for job in work}
    for result in _imap(work, jobs):
        done = results[result.key]
        done.append(result)
        if progress is not None:
            progress(result.key, len(done), count[result.scenario], sum(r.right for r in done))
    return results


def _imap(work: list[Job], jobs: int) -> Iterator[RunResult]:
    if jobs <= 1:
        # NOTE: in this process: logging is quiet only while the runs last (a caller's
        # logging, e.g. the test session's, must not stay disabled after).
        before = logging.root.manager.disable
        _quiet()
        try:
            yield from map(_worker_run, work)
        finally:
            logging.disable(before)
        return
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    with context.Pool(jobs, initializer=_quiet) as pool:
        yield from pool.imap_unordered(_worker_run, work)


@dataclass(frozen=True)
class Summary:
    scenario: Scenario
    workers: int
    dispatch: str
    runs: int
    right: int
    false_flips: int  # disables/rollbacks where none was right (before any onset)
    promotions_wrong: int
    delays: list[int]
    reaction_note: str
    guard: str  # the decision kind that acted most often
    within: int | None  # detection scenarios: runs caught within DETECT_WITHIN windows
    covered: int | None  # known true speedup: runs whose last interval covers it
    no_interval: int  # runs whose last evaluation reported no interval

    @property
    def right_rate(self) -> float:
        return self.right / self.runs if self.runs else 0.0


def summarize(
    scenario: Scenario,
    results: list[RunResult],
    *,
    workers: int | None = None,
    dispatch: str = Dispatch.BALANCER.value,
) -> Summary:
    false_flips = 0
    promotions_wrong = 0
    expect = scenario.expect
    for r in results:
        failure = r.first(frozenset({"rollback", "disable"}))
        wrong_flip = failure is not None and (
            scenario.expect in (Expect.NO_FLIP, Expect.FULL, Expect.NO_FALSE_FLIP)
            or (scenario.expect is Expect.DETECT and r.delay is not None and r.delay <= 0)
        )
        false_flips += wrong_flip
        promoted = r.first(frozenset({"promote"}))
        # A good pair whose pool fails later (memory, outage) may be promoted before.
        promotions_wrong += (
            (
                promoted is not None
                and (
                    expect is Expect.NO_FLIP
                    or (expect is Expect.DISABLE and scenario.never_promote)
                )
            )
            or r.late_promotions > 0
            or (expect is Expect.LOAD_CAPPED and not r.right)
        )
    # A drift may be caught before it crosses the margin (delay <= 0): still a detection.
    delays = sorted(
        r.delay for r in results if r.delay is not None and (r.delay > 0 or expect is Expect.DRIFT)
    )
    within = None
    if expect in (Expect.DETECT, Expect.DRIFT):
        within = sum(
            r.delay is not None
            and r.delay <= DETECT_WITHIN
            and (r.delay > 0 or expect is Expect.DRIFT)
            for r in results
        )
    covered = None
    if scenario.true_speedup is not None:
        covered = sum(bool(r.covers) for r in results)
    notes = [r.note for r in results if not r.right]
    kinds = [f.kind for r in results for f in r.flips if f.action in ("rollback", "disable")]
    return Summary(
        scenario=scenario,
        workers=scenario.traffic.spec_workers if workers is None else workers,
        dispatch=dispatch,
        runs=len(results),
        right=sum(r.right for r in results),
        false_flips=false_flips,
        promotions_wrong=promotions_wrong,
        delays=delays,
        reaction_note=_common(notes),
        guard=max(set(kinds), key=kinds.count) if kinds else "",
        within=within,
        covered=covered,
        no_interval=sum(r.interval is None for r in results),
    )


def _common(notes: list[str]) -> str:
    if not notes:
        return ""
    counts: dict[str, int] = {}
    for note in notes:
        key = note.split(":")[0][:60]
        counts[key] = counts.get(key, 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:2]
    return "; ".join(f"{n}x {k}" for k, n in top)


def delay_cell(delays: list[int]) -> str:
    if not delays:
        return ""
    p90 = delays[min(len(delays) - 1, int(0.9 * len(delays)))]
    return f"median {statistics.median(delays):g}, p90 {p90}, max {delays[-1]}"


def default_jobs() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def elapsed(start: float) -> str:
    return f"{time.monotonic() - start:.0f} s"
