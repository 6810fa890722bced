"""Per-rollout state of the depth ladder: the rung in use, when it was chosen, and the
acceptance watch; the load comes from the balancer's outstanding counts (this
gateway process's requests in flight, the same counts it balances on)."""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gateway.decision.decide import Decision
from gateway.decision.depth import UNUSABLE, AcceptanceWatch, next_rung, rung_loads
from gateway.decision.reasons import DecisionReason as R
from gateway.routing.balancer import Balancer
from specwire import Arm, DepthLadder, PolicySnapshot, PoolSnapshot


@dataclass(frozen=True, slots=True)
class RungChange:
    """A ladder's rung as it changes: `reason` start (the ladder's first request, on its
    default rung), load, no_worker (the rung's pool lost its usable workers) or
    acceptance_reset; `from_k` is None at start."""

    segment: str | None
    rollout_id: int
    from_k: int | None
    to_k: int
    reason: str


RungHook = Callable[[RungChange], None]


@dataclass(slots=True)
class LadderState:
    ladder: DepthLadder
    default: int  # the rung of the rollout's own spec pool
    rung: int
    switched_at: float
    watch: AcceptanceWatch
    segment: str | None = None  # the rollout's segment's name, for the metrics
    # The arm's requests in flight, averaged exponentially over load_smoothing_s, and
    # when it was last updated (None: no request yet).
    in_flight: float | None = None
    in_flight_at: float = 0.0
    switches: int = 0
    resets: int = 0
    history: list[tuple[float, int]] = field(default_factory=list)  # (when, k) per switch


class DepthRouter:
    def __init__(
        self,
        balancer: Balancer,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_change: RungHook | None = None,
    ) -> None:
        self._balancer = balancer
        self._clock = clock
        self._on_change = on_change
        self._states: dict[int, LadderState] = {}

    def state(self, rollout_id: int) -> LadderState | None:
        return self._states.get(rollout_id)

    def route(self, decision: Decision, snapshot: PolicySnapshot) -> Decision:
        """`decision` on the ladder's rung for the current load, when it sends the request
        to its rollout's own spec pool and the rollout has a ladder; else unchanged."""
        rollout = decision.rollout
        if (
            rollout is None
            or rollout.depth_ladder is None
            or decision.arm is not Arm.SPEC
            or decision.reason is R.POOL_UNAVAILABLE
            or decision.pool.id != rollout.spec_pool_id
        ):
            return decision
        ladder = rollout.depth_ladder
        pools = [self._rung_pool(snapshot, decision, r.pool_id) for r in ladder.rungs]
        segment = decision.segment.name if decision.segment is not None else None
        state = self._state(rollout.id, rollout.spec_pool_id, ladder, segment)
        if state is None:
            return decision
        outstanding = self._balancer.outstanding
        in_flight = sum(outstanding(w.id) for p in pools if p is not None for w in p.workers)
        usable = [len(p.healthy_workers()) if p is not None else 0 for p in pools]
        now = self._clock()
        loads = rung_loads(self._smooth(state, in_flight, now), usable)
        chosen = next_rung(ladder, loads, state.rung, now - state.switched_at)
        if chosen != state.rung:
            reason = "no_worker" if loads[state.rung] == UNUSABLE else "load"
            self._switch(rollout.id, state, chosen, now, reason)
        pool = pools[state.rung]
        if pool is None or pool.id == decision.pool.id:
            return decision
        pair = next((v for v in snapshot.pair_versions if v.id == pool.pair_version_id), None)
        if pair is None:
            return decision
        return replace(decision, pool=pool, pair=pair)

    @staticmethod
    def _smooth(state: LadderState, in_flight: int, now: float) -> float:
        """The exponential average of the arm's requests in flight, sampled at each
        request (arrivals see the time average), over load_smoothing_s."""
        tau = state.ladder.load_smoothing_s
        if state.in_flight is None or tau <= 0:
            state.in_flight, state.in_flight_at = float(in_flight), now
            return state.in_flight
        weight = 1.0 - math.exp(-max(now - state.in_flight_at, 0.0) / tau)
        state.in_flight += weight * (in_flight - state.in_flight)
        state.in_flight_at = now
        return state.in_flight

    def observe(self, rollout_id: int, drafts: int, first_position_accepted: int) -> None:
        """One finished spec request's draft steps and how many of them had their first
        drafted token accepted; a sharp change resets the ladder to its default rung."""
        state = self._states.get(rollout_id)
        if state is None or drafts <= 0:
            return
        if state.watch.observe(first_position_accepted, drafts):
            state.resets += 1
            if state.rung != state.default:
                self._switch(rollout_id, state, state.default, self._clock(), "acceptance_reset")
            else:
                state.switched_at = self._clock()

    def _state(
        self, rollout_id: int, spec_pool_id: int, ladder: DepthLadder, segment: str | None
    ) -> LadderState | None:
        """The rollout's state; a new one (on the default rung) when its ladder changed."""
        state = self._states.get(rollout_id)
        if state is not None and state.ladder == ladder:
            return state
        spec_pool = next((i for i, r in enumerate(ladder.rungs) if r.pool_id == spec_pool_id), None)
        if spec_pool is None:
            return None
        state = LadderState(
            ladder=ladder,
            default=spec_pool,
            rung=spec_pool,
            # the first request picks by load at once
            switched_at=-math.inf,
            watch=AcceptanceWatch(threshold=ladder.acceptance_reset),
            segment=segment,
        )
        self._states[rollout_id] = state
        if self._on_change is not None:
            k = ladder.rungs[spec_pool].num_speculative_tokens
            self._on_change(RungChange(segment, rollout_id, None, k, "start"))
        return state

    def _switch(
        self, rollout_id: int, state: LadderState, to: int, now: float, reason: str
    ) -> None:
        was = state.ladder.rungs[state.rung].num_speculative_tokens
        state.rung, state.switched_at = to, now
        state.switches += 1
        k = state.ladder.rungs[to].num_speculative_tokens
        state.history.append((now, k))
        if self._on_change is not None:
            self._on_change(RungChange(state.segment, rollout_id, was, k, reason))

    @staticmethod
    def _rung_pool(
        snapshot: PolicySnapshot, decision: Decision, pool_id: int
    ) -> PoolSnapshot | None:
        """The rung's pool, if it serves what the request asked for (model and adapter)."""
        for p in snapshot.pools:
            if p.id != pool_id or p.pair_version_id is None:
                continue
            if p.served_model_name != decision.pool.served_model_name:
                return None
            if decision.adapter is not None and decision.adapter not in p.adapters:
                return None
            return p
        return None
