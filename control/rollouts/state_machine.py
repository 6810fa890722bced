"""The rollout state machine, pure: which action moves which state where.

    draft ──start──▶ canary ──promote──▶ ramping ──promote──▶ … ──▶ full
    canary/ramping/full/probation ──pause──▶ paused ──resume──▶ (state it paused from)
    any live state ──rollback──▶ rolled_back ──start──▶ canary (a fresh attempt)
    any live state ──disable──▶ disabled ──enable──▶ probation ──promote──▶ ramping/full

Percentages follow the rollout's stages: `promote` moves to the smallest stage
above the current percentage (100 % means `full`); `enable` re-exposes at the
threshold set's probation percentage.
"""

from dataclasses import dataclass
from enum import StrEnum

from control.contract import RolloutState as S


class RolloutAction(StrEnum):
    START = "start"
    PROMOTE = "promote"
    PAUSE = "pause"
    RESUME = "resume"
    ROLLBACK = "rollback"
    DISABLE = "disable"
    ENABLE = "enable"


_LIVE = {S.CANARY, S.RAMPING, S.FULL, S.PROBATION}

ALLOWED: dict[RolloutAction, frozenset[S]] = {
    RolloutAction.START: frozenset({S.DRAFT, S.ROLLED_BACK}),
    RolloutAction.PROMOTE: frozenset({S.CANARY, S.RAMPING, S.PROBATION}),
    RolloutAction.PAUSE: frozenset(_LIVE),
    RolloutAction.RESUME: frozenset({S.PAUSED}),
    RolloutAction.ROLLBACK: frozenset(_LIVE | {S.PAUSED, S.DISABLED}),
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


def plan(
    action: RolloutAction,
    state: S,
    percentage: float,
    stages: list[float],
    *,
    paused_from: S | None = None,
    probation_percentage: float = 1.0,
) -> Transition:
    """Where `action` takes a rollout; raises IllegalTransition when it may not."""
    if state not in ALLOWED[action]:
        raise IllegalTransition(action, state)
    to_state: S
    to_pct = percentage
    new_paused_from: S | None = None
    if action is RolloutAction.START:
        to_state, to_pct = S.CANARY, min(stages)
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
