"""What a run did, and whether it was right: the flips, the oracles, the verdict.

The oracles compute the right answer from the scenario's own model: the last stage
a load-dependent pair still pays at (at the spec pool's per-worker load for the
run's pool size and dispatch), and the window a drifting pair crosses the latency
margin.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from bench.decisions.dispatch import BalancedPools, Dispatch, Group
from bench.decisions.scenarios import Expect, Scenario
from control.simulation.traffic import (
    MAX_LOAD,
    ArmModel,
    TrafficModel,
    mean_e2e_per_token_ms,
    mean_e2e_s,
    per_worker_load,
)
from control.thresholds.schemas import ThresholdValues

# Windows of a pool simulated alone to measure its load at dispatch (the first few
# warm the pool up and are not counted).
ORACLE_WINDOWS, ORACLE_WARMUP = 12, 2
DETECT_WITHIN = 3  # windows: the bar for "caught quickly"


@dataclass(frozen=True)
class Flip:
    second: int
    windows_ingested: int
    task: str
    action: str
    to_state: str | None
    kind: str  # the decision row's kind, e.g. guard_low_acceptance
    reason: str


@dataclass
class RunResult:
    scenario: str
    seed: int
    workers: int = 0
    dispatch: str = Dispatch.BALANCER.value
    flips: list[Flip] = field(default_factory=list)
    onset_window: int | None = None
    max_percentage: float = 0.0
    final_state: str = ""
    windows: int = 0
    right: bool = False
    delay: int | None = None  # windows of regressed data seen when the regression was flipped
    late_promotions: int = 0  # promotions once enough regressed windows were ingested
    # The speedup interval of the last evaluation (None: it reported none) and whether
    # it covers the scenario's true speedup (None: the scenario knows none).
    interval: tuple[float, float] | None = None
    covers: bool | None = None
    note: str = ""

    def first(self, actions: frozenset[str]) -> Flip | None:
        return next((f for f in self.flips if f.action in actions), None)

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.scenario, self.workers, self.dispatch)


def holdout_of(scenario: Scenario) -> float:
    return float(
        scenario.thresholds.get(
            "holdout_percentage", ThresholdValues.model_fields["holdout_percentage"].default
        )
    )


_LOADS: dict[tuple[ArmModel, TrafficModel, float, int, Dispatch], float] = {}


def dispatch_load(
    model: ArmModel, traffic: TrafficModel, rate_per_s: float, workers: int, dispatch: Dispatch
) -> float:
    """Mean load at dispatch of a pool of `workers` serving `rate_per_s`: Little's law
    under random dispatch; under the balancer, measured on the pool simulated alone
    (least-outstanding sends each request to the least-loaded worker, below the mean)."""
    mean_concurrency = per_worker_load(model, traffic, rate_per_s, workers)
    if dispatch is Dispatch.RANDOM or mean_concurrency >= MAX_LOAD:
        return mean_concurrency  # MAX_LOAD: the pool's queue diverges
    key = (model, traffic, rate_per_s, workers, dispatch)
    if key not in _LOADS:
        pools = BalancedPools(traffic, {"spec": workers}, "oracle")
        rng = np.random.default_rng(20_301)
        ws = traffic.window_seconds
        loads = []
        for w in range(ORACLE_WINDOWS):
            n = int(rng.poisson(rate_per_s * ws))
            pools.window(rng, w * ws, (w + 1) * ws, [Group("spec", "spec", model, n)])
            if w >= ORACLE_WARMUP and "spec" in pools.arrived:
                loads.append(pools.arrived["spec"])
        _LOADS[key] = float(np.concatenate(loads).mean()) if loads else 0.0
    return _LOADS[key]


def oracle_max_stage(scenario: Scenario, dispatch: Dispatch = Dispatch.BALANCER) -> float:
    """The last stage a perfect judge would promote to: every stage up to it still pays
    `min_speedup` at the per-worker load the spec pool carries there."""
    s, traffic = scenario, scenario.traffic
    rate = traffic.requests_per_window / traffic.window_seconds
    min_speedup = float(s.thresholds["min_speedup"])
    holdout = holdout_of(s)
    reached = s.stages[0]
    for stage in s.stages[1:]:
        share = 100.0 - holdout if stage >= 100 else stage
        load = dispatch_load(s.spec, traffic, rate * share / 100, traffic.spec_workers, dispatch)
        speedup = mean_e2e_s(s.baseline, traffic, load) / mean_e2e_s(s.spec, traffic, load)
        if speedup < min_speedup:
            break
        reached = stage
    return reached


def drifted(model: ArmModel, per_window: float, windows: int) -> ArmModel:
    """`model` after `windows` windows of drift (its per-token time grown each)."""
    return replace(model, tpot_ms=model.tpot_ms * (1 + per_window) ** windows)


def drift_crossing(scenario: Scenario, dispatch: Dispatch = Dispatch.BALANCER) -> int:
    """Windows after the onset (0: the onset window itself) of the first window whose
    spec is slower than the baseline by more than the latency margin, end-to-end per
    token at the same load (the spec pool's at full)."""
    s, traffic = scenario, scenario.traffic
    assert s.drift_per_window > 0
    margin = float(
        s.thresholds.get("latency_margin", ThresholdValues.model_fields["latency_margin"].default)
    )
    rate = traffic.requests_per_window / traffic.window_seconds * (100 - holdout_of(s)) / 100
    for i in range(1000):
        model = drifted(s.spec, s.drift_per_window, i + 1)
        load = dispatch_load(model, traffic, rate, traffic.spec_workers, dispatch)
        ratio = mean_e2e_per_token_ms(model, traffic, load) / mean_e2e_per_token_ms(
            s.baseline, traffic, load
        )
        if ratio > 1 + margin:
            return i
    raise ValueError("the drift never crosses the margin")


def judge(scenario: Scenario, result: RunResult, dispatch: Dispatch) -> None:
    """Set result.right, .delay, .late_promotions and .note from what happened."""
    failure = result.first(frozenset({"rollback", "disable"}))
    promoted = result.first(frozenset({"promote"}))
    expect = scenario.expect
    if expect is Expect.NO_FLIP:
        result.right = failure is None and promoted is None
        result.note = _describe(failure or promoted)
    elif expect is Expect.FULL:
        result.right = failure is None and result.max_percentage >= 100.0
        result.note = _describe(failure) if failure else f"max {result.max_percentage:g} %"
    elif expect is Expect.NO_FALSE_FLIP:
        result.right = failure is None
        result.note = _describe(failure)
    elif expect is Expect.LOAD_CAPPED:
        cap = oracle_max_stage(scenario, dispatch)
        result.right = result.max_percentage <= cap
        result.note = f"max {result.max_percentage:g} % (oracle {cap:g} %)"
    elif expect is Expect.DISABLE:
        promoted_first = promoted is not None and (
            failure is None or promoted.second < failure.second
        )
        result.right = (
            failure is not None
            and failure.kind.endswith(str(scenario.reason))
            and not (scenario.never_promote and promoted_first)
        )
        result.note = _describe(failure)
        if failure is not None and result.right:
            # What the guard cost: windows from the onset (or the start) to the flip.
            result.delay = failure.windows_ingested - (result.onset_window or 0)
    elif expect is Expect.DETECT:
        _judge_detection(scenario, result, failure)
    elif expect is Expect.DRIFT:
        onset = result.onset_window
        if failure is None or onset is None:
            result.note = "not detected" if onset is not None else "onset never reached"
            return
        crossing = onset + drift_crossing(scenario, dispatch)
        result.delay = failure.windows_ingested - crossing
        result.right = result.delay <= DETECT_WITHIN
        result.note = f"{failure.action} {result.delay} windows after crossing the margin"


def _judge_detection(scenario: Scenario, result: RunResult, failure: Flip | None) -> None:
    onset = result.onset_window
    if onset is not None and scenario.late_promotion_windows is not None:
        result.late_promotions = sum(
            f.action == "promote" and f.windows_ingested - onset >= scenario.late_promotion_windows
            for f in result.flips
        )
    if failure is None or onset is None:
        result.right = False
        result.note = "not detected" if onset is not None else "onset never reached"
        return
    result.delay = failure.windows_ingested - onset
    result.right = result.delay > 0 and result.late_promotions == 0
    result.note = f"{failure.action} after {result.delay} windows"
    if result.late_promotions:
        result.note = (
            f"promoted with >= {scenario.late_promotion_windows} regressed windows in the "
            f"evidence; {result.note}"
        )


def _describe(flip: Flip | None) -> str:
    if flip is None:
        return ""
    return f"{flip.action} at {flip.second} s: {flip.reason[:120]}"
