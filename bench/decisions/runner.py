"""One scenario run: a rollout, simulated traffic, the real control plane on a virtual clock.

Per simulated second, in this order: a window that closed a second ago is
ingested (`control.telemetry.service.ingest_batch`, as POST /internal/v1/telemetry
does), spec workers heartbeat mid-window (`control.workers.service.record_heartbeat`),
and the real Celery tasks run at their beat cadence (`guard_rollout` every 15 s,
`evaluate_canary` every 60 s, `probation_rollout` every 30 s) through the task
objects of the automation app, eagerly, each with its own task id. The traffic
of a window follows the rollout's state and percentage at the window's start,
as a gateway following the snapshot would.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from bench.decisions.scenarios import Expect, Scenario, Trigger
from bench.decisions.traffic import ArmModel, mean_e2e_s, per_worker_load, sample_arm
from bench.decisions.windows import window_of
from control.automation.celery_app import AutomationCelery
from control.automation.tasks import task_name
from control.clock import use_clock
from control.contract import EXPOSING_STATES, Arm, RolloutState, TelemetryBatch, WorkerHeartbeat
from control.db import Database
from control.models import Decision, Pair, PairVersion, Pool, Rollout, Segment, ThresholdSet
from control.rollouts.gates import Evidence
from control.rollouts.service import transition_rollout
from control.rollouts.state_machine import RolloutAction
from control.telemetry.service import ingest_batch
from control.thresholds.schemas import ThresholdValues
from control.workers.service import record_heartbeat

GUARD_EVERY_S = 15
EVALUATE_EVERY_S = 60
PROBATION_EVERY_S = 30
FLUSH_DELAY_S = 1
HEARTBEAT_OFFSET_S = 5
# Each spec worker beats every HEARTBEAT_EVERY windows (staggered), so the staleness
# limit of a simulation is longer than the default (see SIMULATION_SETTINGS).
HEARTBEAT_EVERY = 8
FLIP_ACTIONS = frozenset({"promote", "pause", "rollback", "disable", "enable"})
STOPPING_ACTIONS = frozenset({"rollback", "disable", "pause"})


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
    flips: list[Flip] = field(default_factory=list)
    onset_window: int | None = None
    max_percentage: float = 0.0
    final_state: str = ""
    windows: int = 0
    right: bool = False
    delay: int | None = None  # windows of regressed data seen when the regression was flipped
    note: str = ""

    def first(self, actions: frozenset[str]) -> Flip | None:
        return next((f for f in self.flips if f.action in actions), None)


class _Run:
    def __init__(self, app: AutomationCelery, scenario: Scenario, seed: int) -> None:
        self.app = app
        self.database: Database = app.database
        self.scenario = scenario
        self.rng = np.random.default_rng(seed)
        self.result = RunResult(scenario.name, seed)
        # Each run on its own stretch of the virtual calendar, far from the others.
        self.start = datetime(2030, 1, 1, tzinfo=UTC) + timedelta(days=seed % 10_000)
        self.second = 0
        self.pending: list[tuple[int, list[Any]]] = []  # (ingest second, windows)
        self.trigger_window: int | None = None
        self.full_window: int | None = None
        self.ingested = 0
        self.spec_load = 0.0
        # The rollout's state at each window's start: the traffic of that window follows it.
        self.window_state: dict[int, tuple[RolloutState, float]] = {
            0: (RolloutState.CANARY, scenario.stages[0])
        }

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.second)

    # -- set-up ------------------------------------------------------------------------

    def create(self) -> None:
        s = self.scenario
        tag = uuid.uuid4().hex[:10]
        with self.database.session() as session:
            pair = Pair(name=f"sim-{tag}")
            session.add(pair)
            session.flush()
            version = PairVersion(
                pair_id=pair.id,
                version=1,
                method="draft_model",
                target_ref="sim-target",
                target_digest="0" * 64,
                draft_ref="sim-draft",
                draft_digest="1" * 64,
                num_speculative_tokens=s.traffic.k,
                tokenizer_hash="2" * 64,
                engine_version="sim",
            )
            session.add(version)
            session.flush()
            spec = Pool(
                name=f"spec-{tag}",
                served_model_name="sim",
                target_ref="sim-target",
                pair_version_id=version.id,
            )
            baseline = Pool(name=f"base-{tag}", served_model_name="sim", target_ref="sim-target")
            segment = Segment(name=f"seg-{tag}", selector={})
            thresholds = ThresholdSet(name=f"t-{tag}", version=1, **s.thresholds)
            session.add_all([spec, baseline, segment, thresholds])
            session.flush()
            rollout = Rollout(
                name=f"r-{tag}",
                segment_id=segment.id,
                pair_version_id=version.id,
                spec_pool_id=spec.id,
                baseline_pool_id=baseline.id,
                threshold_set_id=thresholds.id,
                stages=list(s.stages),
                cohort_salt=tag,
            )
            session.add(rollout)
            session.flush()
            transition_rollout(
                session,
                rollout.id,
                RolloutAction.START,
                expected_version=rollout.version,
                actor="admin:simulation",
                reason="start canary",
                evidence=None,
                task_id=None,
                kind=None,
                # The scenarios judge canaries: the offline and shadow stages are waived.
                waive=frozenset(Evidence),
            )
            self.rollout_id, self.segment_id = rollout.id, segment.id
            self.pair_version_id, self.spec_pool_id = version.id, spec.id
            self.holdout = thresholds.holdout_percentage

    # -- the loop ----------------------------------------------------------------------

    def run(self) -> RunResult:
        with use_clock(self.now):
            self.create()
            s = self.scenario
            ws = s.traffic.window_seconds
            self._heartbeat(0)
            for self.second in range(1, s.windows * ws + FLUSH_DELAY_S + 1):
                if self.second % ws == 0:
                    self._close_window(self.second // ws - 1)
                ingested = False
                if self.pending and self.pending[0][0] == self.second:
                    ingested = self._ingest(self.pending.pop(0)[1])
                if self.second % ws == HEARTBEAT_OFFSET_S:
                    self._heartbeat(self.second // ws)
                stop = self._tasks(guard_now=ingested)
                if stop or self._done(ws):
                    break
        self.result.windows = self.ingested
        return self.result

    def _done(self, ws: int) -> bool:
        if self.full_window is None:
            return False
        return self.second // ws >= self.full_window + self.scenario.windows_after_full

    def _rollout(self) -> tuple[RolloutState, float]:
        with self.database.session() as session:
            rollout = session.get(Rollout, self.rollout_id)
            assert rollout is not None
            return RolloutState(rollout.state), rollout.percentage

    def _onset_reached(self, window: int) -> bool:
        onset = self.scenario.onset
        if onset is None or self.trigger_window is None:
            return False
        reached = window >= self.trigger_window + onset.windows
        if reached and self.result.onset_window is None:
            self.result.onset_window = window
        return reached

    def _note_state(self, window: int, state: RolloutState) -> None:
        onset = self.scenario.onset
        if (
            onset is not None
            and self.trigger_window is None
            and (onset.trigger is Trigger.START or onset.trigger.value == state.value)
        ):
            self.trigger_window = window
        if state is RolloutState.FULL and self.full_window is None:
            self.full_window = window

    def _close_window(self, window: int) -> None:
        """Generate the traffic of `window` (it just ended) as the state at its start said."""
        s, traffic = self.scenario, self.scenario.traffic
        state, percentage = self.window_state[window]
        self._note_state(window, state)
        self.result.max_percentage = max(self.result.max_percentage, percentage)
        onset = self._onset_reached(window)
        share = 0.0
        if state in EXPOSING_STATES:
            share = 100.0 - self.holdout if state is RolloutState.FULL else percentage
        total = int(self.rng.poisson(traffic.requests_per_window))
        n_spec = int(self.rng.binomial(total, share / 100.0))
        spec_down = s.spec_down_after and onset
        forced = n_spec if spec_down else 0
        n_spec -= forced
        n_base = total - n_spec - forced
        spec_model: ArmModel = s.spec_after if (onset and s.spec_after) else s.spec
        ws = traffic.window_seconds
        self.spec_load = per_worker_load(spec_model, traffic, n_spec / ws, traffic.spec_workers)
        base_load = per_worker_load(
            s.baseline, traffic, (n_base + forced) / ws, traffic.baseline_workers
        )
        start = self.start + timedelta(seconds=window * ws)
        windows = []
        for arm, model, n, load in (
            (Arm.SPEC, spec_model, n_spec, self.spec_load),
            (Arm.BASELINE, s.baseline, n_base, base_load),
        ):
            if n == 0:
                continue
            windows.append(
                window_of(
                    sample_arm(self.rng, model, traffic, n, load),
                    arm=arm,
                    segment_id=self.segment_id,
                    pair_version_id=self.pair_version_id,
                    rollout_id=self.rollout_id,
                    window_start=start,
                    window_seconds=ws,
                )
            )
        self.pending.append((self.second + FLUSH_DELAY_S, windows))
        # The next window's traffic follows the state now.
        self.window_state[window + 1] = self._rollout()

    def _ingest(self, windows: list[Any]) -> bool:
        """Store a batch; True when it stored windows of the rollout."""
        self.ingested += 1
        if not windows:
            return False
        with self.database.session() as session:
            ack = ingest_batch(
                session,
                TelemetryBatch(
                    gateway_id=f"sim-gateway-{self.rollout_id}",
                    window_start=windows[0].window_start,
                    windows=windows,
                ),
            )
        return ack.stored > 0

    def _heartbeat(self, window: int) -> None:
        s = self.scenario
        onset = self._onset_reached(window)
        if s.spec_down_after and onset:
            return  # the workers are gone: no more beats
        kv = s.kv_after if (onset and s.kv_after is not None) else 0.3
        load = self.spec_load
        running = min(round(load), s.traffic.max_num_seqs)
        waiting = max(round(load) - s.traffic.max_num_seqs, 0)
        with self.database.session() as session:
            for w in range(window % HEARTBEAT_EVERY, s.traffic.spec_workers, HEARTBEAT_EVERY):
                record_heartbeat(
                    session,
                    f"sim-{self.rollout_id}-{w}",
                    WorkerHeartbeat(
                        pool_id=self.spec_pool_id,
                        endpoint_url=f"http://127.0.0.1:9/{self.rollout_id}/{w}",
                        healthy=True,
                        draft_loaded=True,
                        kv_cache_usage=kv,
                        running=running,
                        waiting=waiting,
                        sent_at=self.now(),
                    ),
                    default_kv_cache_limit=0.9,
                )

    def _tasks(self, *, guard_now: bool) -> bool:
        """Run what is due now; True when the run should stop (a terminal flip)."""
        due = []
        if guard_now or self.second % GUARD_EVERY_S == 0:
            due.append("guard_rollout")
        if self.second % EVALUATE_EVERY_S == 0:
            due.append("evaluate_canary")
        if self.second % PROBATION_EVERY_S == 0:
            due.append("probation_rollout")
        for name in due:
            outcome = self.app.tasks[task_name(name)].apply(
                args=[self.rollout_id], task_id=f"sim-{uuid.uuid4().hex}"
            )
            result: dict[str, Any] = outcome.get()
            action = str(result["action"])
            decision_id = result.get("decision_id")
            if action in FLIP_ACTIONS and decision_id is not None:
                with self.database.session() as session:
                    decision = session.get(Decision, decision_id)
                    kind = decision.kind if decision is not None else ""
                self.result.flips.append(
                    Flip(
                        self.second,
                        self.ingested,
                        name,
                        action,
                        result.get("to_state"),
                        kind,
                        str(result["reason"]),
                    )
                )
                if action in STOPPING_ACTIONS:
                    return True
        return False


def run_scenario(app: AutomationCelery, scenario: Scenario, seed: int) -> RunResult:
    run = _Run(app, scenario, seed)
    result = run.run()
    result.final_state = run._rollout()[0].value
    judge(scenario, result)
    return result


def oracle_max_stage(scenario: Scenario) -> float:
    """The last stage a perfect judge would promote to: every stage up to it still pays
    `min_speedup` at the per-worker load the spec pool carries there."""
    s, traffic = scenario, scenario.traffic
    rate = traffic.requests_per_window / traffic.window_seconds
    min_speedup = float(s.thresholds["min_speedup"])
    holdout = float(
        s.thresholds.get(
            "holdout_percentage", ThresholdValues.model_fields["holdout_percentage"].default
        )
    )
    reached = s.stages[0]
    for stage in s.stages[1:]:
        share = 100.0 - holdout if stage >= 100 else stage
        load = per_worker_load(s.spec, traffic, rate * share / 100, traffic.spec_workers)
        speedup = mean_e2e_s(s.baseline, traffic, load) / mean_e2e_s(s.spec, traffic, load)
        if speedup < min_speedup:
            break
        reached = stage
    return reached


def judge(scenario: Scenario, result: RunResult) -> None:
    """Set result.right, .delay and .note from what happened."""
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
        cap = oracle_max_stage(scenario)
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
        onset = result.onset_window
        if failure is None or onset is None:
            result.right = False
            result.note = "not detected" if onset is not None else "onset never reached"
            return
        result.delay = failure.windows_ingested - onset
        result.right = result.delay > 0
        result.note = f"{failure.action} after {result.delay} windows"


def _describe(flip: Flip | None) -> str:
    if flip is None:
        return ""
    return f"{flip.action} at {flip.second} s: {flip.reason[:120]}"
