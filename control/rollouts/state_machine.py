"""The rollout state machine, pure: which action moves which state where.

    draft ──evaluate──▶ offline (the automation starts the shadow once an evaluation qualifies)
    draft/offline/rolled_back ──start──▶ shadow ──start──▶ canary
                                   ──promote──▶ ramping ──promote──▶ … ──▶ full
    shadow/canary/ramping/full/probation ──pause──▶ paused ──resume──▶ (state it paused from)
    any live state ──rollback──▶ rolled_back ──start──▶ shadow (a fresh attempt)
    any live state ──disable──▶ disabled ──enable──▶ probation ──promote──▶ ramping/full

`start` moves a rollout one stage towards its canary, and each move needs its
evidence (control.rollouts.gates): into shadow, an offline evaluation that
meets the threshold set's offline criteria; out of shadow, the shadow's exit
criterion (the automation starts the canary itself when it holds). An admin
may waive either, with a reason; a waived shadow goes straight to canary.

Percentages follow the rollout's stages: `promote` moves to the smallest stage
above the current percentage (100 % means `full`); `enable` re-exposes at the
threshold set's probation percentage; in shadow the percentage is the share of
the segment's requests mirrored (`shadow_percentage`), none of them exposed.
"""

from dataclasses import dataclass
from enum import StrEnum

from specwire import RolloutState as S


class RolloutAction(StrEnum):
    EVALUATE = "evaluate"
    START = "start"
    PROMOTE = "promote"
    PAUSE = "pause"
    RESUME = "resume"
    ROLLBACK = "rollback"
    DISABLE = "disable"
    ENABLE = "enable"


_LIVE = {S.SHADOW, S.CANARY, S.RAMPING, S.FULL, S.PROBATION}
# States `start` leaves for the shadow stage (gated by the offline evaluation).
BEFORE_SHADOW = frozenset({S.DRAFT, S.OFFLINE, S.ROLLED_BACK})

ALLOWED: dict[RolloutAction, frozenset[S]] = {
    RolloutAction.EVALUATE: frozenset({S.DRAFT, S.ROLLED_BACK}),
    RolloutAction.START: frozenset(BEFORE_SHADOW | {S.SHADOW}),
    RolloutAction.PROMOTE: frozenset({S.CANARY, S.RAMPING, S.PROBATION}),
    RolloutAction.PAUSE: frozenset(_LIVE),
    RolloutAction.RESUME: frozenset({S.PAUSED}),
    RolloutAction.ROLLBACK: frozenset(_LIVE | {S.OFFLINE, S.PAUSED, S.DISABLED}),
    RolloutAction.DISABLE: frozenset(_LIVE | {S.PAUSED}),
    RolloutAction.ENABLE: frozenset({S.DISABLED}),
}


@dataclass(frozen=True)
class Transition:
    action: RolloutAction
    from_state: S
    to_state: S
    from_percentage: float
    to_percentage: float
    paused_from: S | None


class IllegalTransition(Exception):
    def __init__(self, action: RolloutAction, state: S) -> None:
        self.action = action
        self.state = state
        self.allowed = allowed_actions(state)
        super().__init__(
            f"cannot {action.value} a rollout in state {state.value}; "
            f"allowed: {', '.join(a.value for a in self.allowed) or 'none'}"
        )


def allowed_actions(state: S) -> list[RolloutAction]:
    return [a for a, states in ALLOWED.items() if state in states]


def next_stage(stages: list[float], percentage: float) -> float:
    above = sorted(s for s in stages if s > percentage)
    return above[0] if above else 100.0


def canary_stage(stages: list[float]) -> float:
    """The canary's first stage: where `start` out of shadow (or a waived shadow) goes."""
    return min(stages)


def plan(
    action: RolloutAction,
    state: S,
    percentage: float,
    stages: list[float],
    *,
    paused_from: S | None = None,
    probation_percentage: float = 1.0,
    shadow_percentage: float = 10.0,
    skip_shadow: bool = False,
) -> Transition:
    """Where `action` takes a rollout; raises IllegalTransition when it may not.

    `skip_shadow` (a waived shadow) makes `start` go to canary from any state."""
    if state not in ALLOWED[action]:
        raise IllegalTransition(action, state)
    to_state: S
    to_pct = percentage
    new_paused_from: S | None = None
    if action is RolloutAction.EVALUATE:
        to_state, to_pct = S.OFFLINE, 0.0
    elif action is RolloutAction.START and state in BEFORE_SHADOW and not skip_shadow:
        to_state, to_pct = S.SHADOW, shadow_percentage
    elif action is RolloutAction.START:
        to_state, to_pct = S.CANARY, canary_stage(stages)
    elif action is RolloutAction.PROMOTE:
        to_pct = next_stage(stages, percentage)
        to_state = S.FULL if to_pct >= 100.0 else S.RAMPING
    elif action is RolloutAction.PAUSE:
        to_state, new_paused_from = S.PAUSED, state
    elif action is RolloutAction.RESUME:
        to_state = paused_from or S.CANARY
    elif action is RolloutAction.ROLLBACK:
        to_state, to_pct = S.ROLLED_BACK, 0.0
    elif action is RolloutAction.DISABLE:
        to_state, to_pct = S.DISABLED, 0.0
    else:  # ENABLE
        to_state, to_pct = S.PROBATION, probation_percentage
    return Transition(action, state, to_state, percentage, to_pct, new_paused_from)
