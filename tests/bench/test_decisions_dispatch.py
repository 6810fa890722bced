"""The decision suite's balancer dispatch: requests go through the gateway's real
balancer in continuous time, and what it yields is what a gateway would flush.

The pools here are `gateway.routing.balancer.Balancer` instances over real
`PoolSnapshot`s; nothing is mocked. The end-to-end runs drive the real control plane
(migrations, ingestion, heartbeats, Celery tasks) on a virtual clock.
"""

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from bench.decisions.__main__ import main
from bench.decisions.dispatch import BalancedPools, Dispatch, Group
from bench.decisions.judge import Flip, RunResult, drift_crossing, judge, oracle_max_stage
from bench.decisions.runner import run_scenario
from bench.decisions.scenarios import BY_NAME, FLEET, with_workers
from bench.decisions.suite import simulation_app, summarize
from control.automation.celery_app import AutomationCelery
from control.simulation.traffic import sample_arm
from control.simulation.windows import window_of
from gateway.routing.balancer import Balancer
from specwire import Arm, TelemetryWindow

# 4 workers, ~4 requests in flight on each (about 160 requests/s of 0.12 s).
WORKERS, RATE = 4, 160.0


def _balanced(
    seconds: float, step: float, seed: int = 1
) -> tuple[BalancedPools, list[int], list[np.ndarray]]:
    """Run one pool for `seconds` in steps; the per-step spread of outstanding counts
    and the loads at dispatch of the requests that ended."""
    pools = BalancedPools(FLEET.traffic, {"baseline": WORKERS}, "t")
    rng = np.random.default_rng(seed)
    spreads, loads = [], []
    for i in range(int(seconds / step)):
        n = int(rng.poisson(RATE * step))
        ended = pools.window(
            rng, i * step, (i + 1) * step, [Group("b", "baseline", FLEET.baseline, n)]
        )
        outstanding = pools.outstanding("baseline")
        spreads.append(max(outstanding) - min(outstanding))
        if "b" in ended:
            loads.append(ended["b"].gateway_load)
    return pools, spreads, loads


def test_the_gateway_balancer_keeps_every_worker_near_the_same_load() -> None:
    pools, spreads, loads = _balanced(100.0, 0.05)
    assert isinstance(pools.balancers["baseline"], Balancer)
    load = np.concatenate(loads)[200:]  # past the first second's warm-up
    assert 3.0 < load.mean() < 5.5
    # Least-outstanding: the load at dispatch varies far less than Poisson's (var = mean).
    assert load.var() < 0.5 * load.mean()
    # ...and no worker runs ahead of another by more than a few requests, ever.
    assert max(spreads) <= 5 and np.mean(spreads) < 1.5
    # The random mode draws Poisson loads: as wide as the mean.
    poisson = sample_arm(np.random.default_rng(1), FLEET.baseline, FLEET.traffic, 20_000, 4.2)
    assert poisson.gateway_load.var() > 0.8 * poisson.gateway_load.mean()


def test_requests_stay_in_flight_across_windows_and_none_is_lost() -> None:
    pools = BalancedPools(FLEET.traffic, {"spec": 2, "baseline": 2}, "t")
    rng = np.random.default_rng(3)
    sent = ended = 0
    crossed = False
    for w in range(30):
        groups = [
            Group("spec", "spec", FLEET.baseline, 300),
            Group("baseline", "baseline", FLEET.baseline, 400),
        ]
        out = pools.window(rng, w * 10.0, (w + 1) * 10.0, groups)
        sent += 700
        ended += sum(r.n for r in out.values())
        in_flight = sum(pools.outstanding("spec")) + sum(pools.outstanding("baseline"))
        assert sent == ended + in_flight
        crossed |= in_flight > 0
    assert crossed  # some request was still running when its window closed


def test_balancer_windows_are_telemetry_windows_with_exact_load_sums() -> None:
    pools = BalancedPools(FLEET.traffic, {"spec": WORKERS}, "t")
    rng = np.random.default_rng(5)
    pools.window(rng, 0.0, 10.0, [Group("spec", "spec", BY_NAME["good"].spec, 1600)])
    requests = pools.window(rng, 10.0, 20.0, [Group("spec", "spec", BY_NAME["good"].spec, 1600)])[
        "spec"
    ]
    window = window_of(
        requests,
        arm=Arm.SPEC,
        segment_id=1,
        pair_version_id=2,
        rollout_id=3,
        window_start=datetime(2030, 1, 1, tzinfo=UTC),
        window_seconds=10,
    )
    again = TelemetryWindow.model_validate(window.model_dump())
    assert again.requests == requests.n > 1500
    assert sum(s.requests for s in again.by_load) == requests.n
    assert all(s.load_sum is not None for s in again.by_load)
    assert sum(s.load_sum or 0 for s in again.by_load) == again.load.gateway_load_sum
    assert again.load.gateway_load_sum == int(requests.gateway_load.sum()) > 0
    assert len(again.by_load) >= 2 and again.request_acceptance.requests > 1000


def test_oracles_follow_the_pool_size() -> None:
    loser = BY_NAME["load_loser"]
    caps = [oracle_max_stage(with_workers(loser, n)) for n in (1, 4, 8, 16)]
    assert caps == sorted(caps) and caps[0] < caps[-1]
    # Least-outstanding dispatch meets less load than the pool's mean concurrency.
    balanced = oracle_max_stage(with_workers(loser, 8), Dispatch.BALANCER)
    assert balanced >= oracle_max_stage(with_workers(loser, 8), Dispatch.RANDOM)
    # Per-token time 1.3x faster, 2 % slower a window: past 1.1x the baseline after ~19.
    assert 15 <= drift_crossing(with_workers(BY_NAME["drift"], 4)) <= 22


def _flip(windows: int, action: str, kind: str) -> Flip:
    return Flip(windows * 10, windows, "task", action, None, kind, "why")


def test_a_promotion_with_two_regressed_windows_in_the_evidence_is_wrong() -> None:
    scenario = BY_NAME["ramp_errors"]
    early = RunResult(
        "ramp_errors",
        0,
        flips=[_flip(21, "promote", "canary_promote"), _flip(30, "rollback", "guard_x")],
        onset_window=20,
    )
    late = RunResult(
        "ramp_errors",
        1,
        flips=[_flip(22, "promote", "canary_promote"), _flip(30, "rollback", "guard_x")],
        onset_window=20,
    )
    for r in (early, late):
        judge(scenario, r, Dispatch.BALANCER)
    assert (early.right, early.late_promotions) == (True, 0)
    assert (late.right, late.late_promotions) == (False, 1)
    summary = summarize(scenario, [early, late], workers=4)
    assert (summary.promotions_wrong, summary.within) == (1, 0)


def test_drift_is_judged_from_the_window_it_crosses_the_margin() -> None:
    scenario = with_workers(BY_NAME["drift"], 4)
    crossing = 50 + drift_crossing(scenario)
    caught = RunResult("drift", 0, flips=[_flip(crossing + 3, "disable", "g")], onset_window=50)
    slow = RunResult("drift", 1, flips=[_flip(crossing + 4, "disable", "g")], onset_window=50)
    for r in (caught, slow):
        judge(scenario, r, Dispatch.BALANCER)
    assert (caught.right, caught.delay, slow.right, slow.delay) == (True, 3, False, 4)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AutomationCelery]:
    app = simulation_app(Path(tmp_path_factory.mktemp("dispatch")))
    yield app
    app.database.dispose()


def test_a_regression_after_full_is_caught_through_the_balancer(app: AutomationCelery) -> None:
    result = run_scenario(app, with_workers(BY_NAME["full_latency"], 16), 0)
    assert (result.workers, result.dispatch) == (16, "balancer")
    assert result.max_percentage == 100.0
    assert result.right, result.note
    assert result.delay is not None and 1 <= result.delay <= 3
    assert result.flips[-1].kind.endswith("latency_regression")


def test_heavy_tailed_identical_arms_report_their_interval(app: AutomationCelery) -> None:
    result = run_scenario(app, with_workers(BY_NAME["heavy_null"], 4), 0, Dispatch.RANDOM)
    assert result.right, result.note
    assert result.interval is not None and result.covers is not None
    lower, upper = result.interval
    assert lower <= upper and result.covers == (lower <= 1.0 <= upper)


def test_the_command_writes_one_row_per_scenario_workers_and_dispatch(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    argv = ["--runs", "1", "--jobs", "1", "--scenarios", "tiny", "--workers", "1,2"]
    assert main([*argv, "--dispatch", "balancer,random", "--write-results", str(results)]) == 0
    text = results.read_text()
    assert text.startswith("# Benchmark results")
    rows = [line for line in text.splitlines() if line.startswith("| tiny |")]
    assert [row.split("|")[2:4] for row in rows] == [
        [" 1 ", " balancer "],
        [" 1 ", " random "],
        [" 2 ", " balancer "],
        [" 2 ", " random "],
    ]
    assert all("| 100.0% |" in row for row in rows)


def test_runs_per_scenario_override_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "RESULTS.md"
    argv = ["--runs", "1", "--jobs", "1", "--scenarios", "tiny,weak", "--workers", "1"]
    assert main([*argv, "--scenario-runs", "tiny=2", "--write-results", str(results)]) == 0
    lines = results.read_text().splitlines()
    rows = [line.split("|") for line in lines if line.startswith(("| tiny |", "| weak |"))]
    assert {(r[1].strip(), r[4].strip()) for r in rows} == {("tiny", "2"), ("weak", "1")}
    assert "tiny (1 workers, balancer): 2/2 runs" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([*argv, "--scenario-runs", "good=5"])  # not among the chosen scenarios


def test_a_rollout_started_at_full_is_judged_by_the_monitors_after_full(
    app: AutomationCelery,
) -> None:
    scenario = with_workers(BY_NAME["full_errors"], 4)
    result = run_scenario(app, scenario, 0, start_full=True)
    # An admin promoted it before any traffic: no automated promotion, the onset 5
    # windows into full, the error spike (2 % -> 8 %) disabled within 3 windows.
    assert result.max_percentage == 100.0 and result.onset_window == 5
    assert [f.action for f in result.flips] == ["disable"]
    assert result.flips[0].kind.endswith("error_regression")
    assert result.right and result.delay is not None and 1 <= result.delay <= 3


def test_an_in_process_suite_run_leaves_logging_as_it_found_it() -> None:
    import logging

    from bench.decisions.suite import _imap

    logging.disable(logging.NOTSET)
    assert list(_imap([], jobs=1)) == []
    assert logging.root.manager.disable == logging.NOTSET
