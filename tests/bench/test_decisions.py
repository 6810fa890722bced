"""The decision scenario suite: its windows are the gateway's, and a fast subset of runs.

The full suite (`python -m bench.decisions --runs 200`) writes bench/RESULTS.md; here a
few seeded runs of each kind check the harness and the automation's verdicts end to end
(real migrations, ingestion, heartbeats and Celery tasks on a virtual clock), on the
legacy profile (40 workers per pool) with random dispatch, where today's statistics
are right; tests/bench/test_decisions_dispatch.py covers the balancer dispatch.
"""

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from bench.decisions.dispatch import Dispatch
from bench.decisions.judge import Flip, RunResult, oracle_max_stage
from bench.decisions.runner import run_scenario
from bench.decisions.scenarios import CATALOGS, Scenario
from bench.decisions.suite import simulation_app, summarize
from control.automation.celery_app import AutomationCelery
from control.simulation.traffic import sample_arm
from control.simulation.windows import window_of
from gateway.telemetry import RequestRecord, TelemetryAggregator
from specwire import HISTOGRAM_FIELDS, SLICE_HISTOGRAM_FIELDS, Arm

T0 = 1_700_000_000
LEGACY = CATALOGS["legacy"]
GOOD, TRAFFIC = LEGACY["good"].spec, LEGACY["good"].traffic


def _run(app: AutomationCelery, scenario: Scenario, seed: int) -> RunResult:
    return run_scenario(app, scenario, seed, Dispatch.RANDOM)


def _records(requests_: object) -> Iterator[RequestRecord]:
    r = requests_
    for i in range(r.n):  # type: ignore[attr-defined]
        error = bool(r.errors[i])  # type: ignore[attr-defined]
        tokens = 0 if error else int(r.tokens[i])  # type: ignore[attr-defined]
        per_position = tuple(int(x) for x in r.accepted_per_position[i])  # type: ignore[attr-defined]
        yield RequestRecord(
            request_id=str(i),
            tenant="t",
            segment_id=1,
            segment_name="s",
            arm=Arm.SPEC,
            pair_version_id=2,
            rollout_id=3,
            reason="cohort_spec",
            outcome="error" if error else "ok",
            http_status=502 if error else 200,
            prompt_tokens=100,
            completion_tokens=tokens,
            drafts=0 if error else int(r.drafts[i]),  # type: ignore[attr-defined]
            drafted_tokens=0 if error else int(r.drafts[i]) * 3,  # type: ignore[attr-defined]
            accepted_tokens=0 if error else sum(per_position),
            accepted_per_position=() if error else per_position,
            ttft_ms=None if error else float(r.ttft_ms[i]),  # type: ignore[attr-defined]
            tpot_ms=None if error or tokens < 2 else float(r.tpot_ms[i]),  # type: ignore[attr-defined]
            e2e_ms=float(r.e2e_ms[i]),  # type: ignore[attr-defined]
            finished_at=T0 + 1.0,
            worker_id="w",
            gateway_load=int(r.gateway_load[i]),  # type: ignore[attr-defined]
            engine_running=int(r.engine_running[i]),  # type: ignore[attr-defined]
            engine_waiting=int(r.engine_waiting[i]),  # type: ignore[attr-defined]
        )


def test_simulated_windows_equal_what_the_gateway_aggregates() -> None:
    rng = np.random.default_rng(7)
    requests = sample_arm(rng, GOOD, TRAFFIC, 300, 3.0)
    aggregator = TelemetryAggregator("gw", window_seconds=10, max_pending_windows=4)
    for record in _records(requests):
        aggregator.record(record)
    [batch] = aggregator.drain_all()
    [gateway] = batch.windows
    simulated = window_of(
        requests,
        arm=Arm.SPEC,
        segment_id=1,
        pair_version_id=2,
        rollout_id=3,
        window_start=datetime.fromtimestamp(T0, UTC),
        window_seconds=10,
    )
    a, b = gateway.model_dump(), simulated.model_dump()
    for doc in (a, b):
        for histogram in _histograms(doc):
            # Float sums in another order: compared with a tolerance below.
            histogram["sum_ms"] = round(histogram["sum_ms"], 3)
            histogram["sum_log"] = round(histogram["sum_log"], 6)
            histogram["sum_sq_log"] = round(histogram["sum_sq_log"], 5)
    assert a == b
    assert gateway.request_acceptance.requests > 250
    assert len(gateway.by_load) >= 4


def _histograms(doc: dict[str, object]) -> Iterator[dict[str, float]]:
    for key in HISTOGRAM_FIELDS:
        yield doc[key]  # type: ignore[misc]
    for load_slice in doc["by_load"]:  # type: ignore[attr-defined]
        for key in SLICE_HISTOGRAM_FIELDS:
            yield load_slice[key]


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AutomationCelery]:
    app = simulation_app(Path(tmp_path_factory.mktemp("decisions")))
    yield app
    app.database.dispose()


@pytest.mark.parametrize("seed", [0, 1])
def test_identical_arms_are_neither_rolled_back_nor_promoted(
    app: AutomationCelery, seed: int
) -> None:
    result = _run(app, LEGACY["null"], seed)
    assert result.right, result.note
    assert not [f for f in result.flips if f.action in ("rollback", "disable", "promote")]
    # It stops at the canary: paused, for lack of benefit or of conclusive evidence.
    assert result.final_state == "paused" and result.max_percentage == 1.0


def test_a_good_pair_reaches_full_through_every_stage(app: AutomationCelery) -> None:
    result = _run(app, LEGACY["good"], 0)
    assert result.right, result.note
    assert [f.action for f in result.flips] == ["promote"] * 4
    assert result.final_state == "full"


@pytest.mark.parametrize("name", ["ramp_latency", "full_latency", "full_errors"])
def test_regressions_are_caught_within_a_few_windows(app: AutomationCelery, name: str) -> None:
    result = _run(app, LEGACY[name], 0)
    assert result.right, result.note
    assert result.delay is not None and 1 <= result.delay <= 5
    expected = "rollback" if name == "ramp_latency" else "disable"
    assert result.flips[-1].action == expected
    code = "error_regression" if name == "full_errors" else "latency_regression"
    assert result.flips[-1].kind.endswith(code)


def test_a_pair_that_loses_under_load_stops_where_it_still_pays(app: AutomationCelery) -> None:
    scenario = LEGACY["load_loser"]
    assert oracle_max_stage(scenario, Dispatch.RANDOM) == 25.0
    result = _run(app, scenario, 0)
    assert result.right, result.note
    assert result.max_percentage == 25.0


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("weak", "low_acceptance"),
        ("memory", "memory_pressure"),
        ("draft_outage", "draft_unavailable"),
    ],
)
def test_guards_act_for_the_right_reason(app: AutomationCelery, name: str, code: str) -> None:
    result = _run(app, LEGACY[name], 0)
    assert result.right, result.note
    assert result.flips[-1].kind.endswith(code)
    if name == "weak":
        assert len(result.flips) == 1  # never promoted first


def test_tiny_traffic_never_flips_on_too_little_evidence(app: AutomationCelery) -> None:
    result = _run(app, LEGACY["tiny"], 0)
    summary = summarize(LEGACY["tiny"], [result])
    assert summary.right == 1 and summary.false_flips == 0
    assert not [f for f in result.flips if f.action == "promote"]


def test_a_promotion_before_a_later_pool_failure_is_not_counted_wrong() -> None:
    def promoted_then_disabled(name: str) -> RunResult:
        flips = [
            Flip(600, 60, "evaluate", "promote", "ramping", "canary_promote", "pays"),
            Flip(900, 90, "guard", "disable", "disabled", "guard_memory_pressure", "kv"),
        ]
        return RunResult(name, 0, flips=flips, right=True)

    memory = summarize(LEGACY["memory"], [promoted_then_disabled("memory")])
    weak = summarize(LEGACY["weak"], [promoted_then_disabled("weak")])
    assert (memory.promotions_wrong, weak.promotions_wrong) == (0, 1)
