"""One scenario run: a rollout, simulated traffic, the real control plane on a virtual clock.

Per simulated second, in this order: a window that closed a second ago is
ingested (`control.telemetry.service.ingest_batch`, as POST /internal/v1/telemetry
does), spec workers heartbeat mid-window (`control.workers.service.record_heartbeat`),
and the real Celery tasks run at their beat cadence (`guard_rollout` every 15 s,
`evaluate_canary` every 60 s, `probation_rollout` every 30 s) through the task
objects of the automation app, eagerly, each with its own task id. The traffic
of a window follows the rollout's state and percentage at the window's start,
as a gateway following the snapshot would.

Dispatch (`Dispatch`): through the gateway's real balancer in continuous time
(bench/decisions/dispatch.py; requests count in the window they end in), or, as
the suite did first, each request's load drawn as Poisson around the pool's
per-worker concurrency (requests count in the window they arrive in).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import select

from bench.decisions.dispatch import BalancedPools, Dispatch, Group
from bench.decisions.judge import Flip, RunResult, drifted, judge
from bench.decisions.scenarios import Scenario, Trigger
from control.automation.celery_app import AutomationCelery
from control.automation.tasks import task_name
from control.clock import use_clock
from control.db import Database
from control.models import Decision, Rollout, ThresholdSet
from control.rollouts.gates import StageGate
from control.rollouts.service import transition_rollout
from control.rollouts.state_machine import RolloutAction
from control.simulation.rollout import seed_rollout
from control.simulation.traffic import ArmModel, per_worker_load, sample_arm
from control.simulation.windows import window_of
from control.telemetry.service import ingest_batch
from control.workers.service import record_heartbeat
from specwire import EXPOSING_STATES, Arm, RolloutState, TelemetryBatch, WorkerHeartbeat

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


class _Run:
    def __init__(
        self,
        app: AutomationCelery,
        scenario: Scenario,
        seed: int,
        dispatch: Dispatch,
        start_full: bool = False,
    ) -> None:
        self.app = app
        self.database: Database = app.database
        self.scenario = scenario
        self.dispatch = dispatch
        self.rng = np.random.default_rng(seed)
        self.result = RunResult(
            scenario.name, seed, workers=scenario.traffic.spec_workers, dispatch=dispatch.value
        )
        self.pools: BalancedPools | None = None
        self.start_full = start_full
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
            thresholds = ThresholdSet(name=f"t-{tag}", version=1, **s.thresholds)
            seeded = seed_rollout(
                session,
                tag=tag,
                pair_name=f"sim-{tag}",
                model="sim",
                k=s.traffic.k,
                engine_version="sim",
                thresholds=thresholds,
                stages=list(s.stages),
                actor="admin:simulation",
                reason="start canary",
                # The scenarios judge canaries: the offline and shadow stages are waived.
                waive=frozenset(StageGate),
            )
            rollout = seeded.rollout
            while self.start_full and rollout.state != RolloutState.FULL.value:
                # An admin promotes stage by stage to full before any traffic: the
                # monitors after full are judged whatever the canary's verdicts.
                rollout = transition_rollout(
                    session,
                    rollout.id,
                    RolloutAction.PROMOTE,
                    expected_version=rollout.version,
                    actor="admin:simulation",
                    reason="start at full",
                    evidence=None,
                    task_id=None,
                    kind=None,
                )
            self.rollout_id, self.segment_id = rollout.id, seeded.segment_id
            self.pair_version_id, self.spec_pool_id = seeded.pair_version_id, seeded.spec_pool_id
            self.holdout = thresholds.holdout_percentage
        if self.dispatch is Dispatch.BALANCER:
            traffic = s.traffic
            self.pools = BalancedPools(
                traffic,
                {"spec": traffic.spec_workers, "baseline": traffic.baseline_workers},
                tag,
            )

    # -- the loop ----------------------------------------------------------------------

    def run(self) -> RunResult:
        with use_clock(self.now):
            self.create()
            self.window_state[0] = self._rollout()
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
        spec_model = self._spec_model(window, onset)
        ws = traffic.window_seconds
        if self.pools is not None:
            # Forced requests (the spec pool is down) load the baseline pool but are
            # no arm's evidence.
            ended = self.pools.window(
                self.rng,
                window * ws,
                (window + 1) * ws,
                [
                    Group(Arm.SPEC.value, "spec", spec_model, n_spec),
                    Group(Arm.BASELINE.value, "baseline", s.baseline, n_base),
                    Group("forced", "baseline", s.baseline, forced),
                ],
            )
            arms = [(arm, ended.get(arm.value)) for arm in (Arm.SPEC, Arm.BASELINE)]
        else:
            self.spec_load = per_worker_load(spec_model, traffic, n_spec / ws, traffic.spec_workers)
            base_load = per_worker_load(
                s.baseline, traffic, (n_base + forced) / ws, traffic.baseline_workers
            )
            arms = [
                (arm, sample_arm(self.rng, model, traffic, n, load) if n else None)
                for arm, model, n, load in (
                    (Arm.SPEC, spec_model, n_spec, self.spec_load),
                    (Arm.BASELINE, s.baseline, n_base, base_load),
                )
            ]
        start = self.start + timedelta(seconds=window * ws)
        windows = [
            window_of(
                requests,
                arm=arm,
                segment_id=self.segment_id,
                pair_version_id=self.pair_version_id,
                rollout_id=self.rollout_id,
                window_start=start,
                window_seconds=ws,
            )
            for arm, requests in arms
            if requests is not None and requests.n > 0
        ]
        self.pending.append((self.second + FLUSH_DELAY_S, windows))
        # The next window's traffic follows the state now.
        self.window_state[window + 1] = self._rollout()

    def _spec_model(self, window: int, onset: bool) -> ArmModel:
        s = self.scenario
        model = s.spec_after if (onset and s.spec_after) else s.spec
        if onset and s.drift_per_window > 0:
            assert self.result.onset_window is not None
            model = drifted(model, s.drift_per_window, window - self.result.onset_window + 1)
        return model

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
        max_seqs = s.traffic.max_num_seqs
        # In flight on each worker: the balancer's count, or the pool's mean concurrency.
        outstanding = (
            self.pools.outstanding("spec")
            if self.pools is not None
            else [round(self.spec_load)] * s.traffic.spec_workers
        )
        with self.database.session() as session:
            for w in range(window % HEARTBEAT_EVERY, s.traffic.spec_workers, HEARTBEAT_EVERY):
                running = min(outstanding[w], max_seqs)
                waiting = max(outstanding[w] - max_seqs, 0)
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
                args=[self.rollout_id], task_id=f"sim-{name}-{uuid.uuid4().hex}"
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

    def last_interval(self) -> tuple[float, float] | None:
        """The speedup interval the last evaluation reported: this stage's end-to-end
        per-token comparison, else the next stage's."""
        with self.database.session() as session:
            evidence = session.scalars(
                select(Decision.evidence)
                .where(
                    Decision.rollout_id == self.rollout_id,
                    Decision.task_id.like("sim-evaluate_canary-%"),
                )
                .order_by(Decision.id.desc())
                .limit(1)
            ).first()
        statistics = (evidence or {}).get("statistics") or {}
        found = (statistics.get("stage") or {}).get("e2e_per_token") or (
            statistics.get("next_stage") or {}
        ).get("speedup")
        if not found:
            return None
        return float(found["lower"]), float(found["upper"])


def run_scenario(
    app: AutomationCelery,
    scenario: Scenario,
    seed: int,
    dispatch: Dispatch = Dispatch.BALANCER,
    *,
    start_full: bool = False,
) -> RunResult:
    """One run of `scenario` (its traffic's pool sizes, see `with_workers`); with
    `start_full`, an admin takes the rollout to full before the first window."""
    run = _Run(app, scenario, seed, dispatch, start_full)
    result = run.run()
    result.final_state = run._rollout()[0].value
    result.interval = run.last_interval()
    if scenario.true_speedup is not None and result.interval is not None:
        lower, upper = result.interval
        result.covers = lower <= scenario.true_speedup <= upper
    judge(scenario, result, dispatch)
    return result
