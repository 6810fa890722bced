"""Depth by load: which rung of a rollout's depth ladder serves the next spec request.

Pure rules, no clock and no I/O; `gateway.routing.depth` keeps the state per rollout
and feeds them the balancer's outstanding counts.

A rung's load is the per-worker load it would carry serving the whole spec arm: the
arm's requests in flight (on every rung's pool) / the rung pool's usable workers.
Counting the arm's requests on every rung keeps the signal continuous across a switch
(the old rung's requests still in flight count until they finish), so a switch does
not by itself undo the condition that caused it.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specwire import DepthLadder

UNUSABLE = math.inf  # the load of a rung whose pool has no usable worker


def rung_loads(in_flight: float, usable_workers: Sequence[int]) -> list[float]:
    """Each rung's per-worker load if it served the arm's `in_flight` requests."""
    return [in_flight / n if n > 0 else UNUSABLE for n in usable_workers]


def _bound(ladder: DepthLadder, i: int) -> float:
    bound = ladder.rungs[i].max_load
    return math.inf if bound is None else bound


def next_rung(
    ladder: DepthLadder, loads: Sequence[float], current: int, since_switch_s: float
) -> int:
    """The rung for the next request, from `current`, `since_switch_s` after the last switch.

    - A rung may be kept, or entered from a deeper one, while its load is at most its
      max_load + hysteresis; it is entered from a shallower one only at or below
      max_load - hysteresis. Going away and back thus needs the load to move by more
      than twice the hysteresis.
    - No switch within min_dwell_s of the last one, unless the current rung has no
      usable worker (then the best usable rung, dwell or not).
    - Deeper is preferred: the deepest rung that qualifies wins.
    """
    h = ladder.hysteresis
    n = len(ladder.rungs)
    if loads[current] == UNUSABLE:
        usable = [i for i in range(n) if loads[i] != UNUSABLE]
        if not usable:
            return current
        fitting = [i for i in usable if loads[i] <= _bound(ladder, i)]
        return fitting[0] if fitting else usable[-1]
    if since_switch_s < ladder.min_dwell_s:
        return current
    for i in range(current):
        if loads[i] <= _bound(ladder, i) - h:
            return i
    if loads[current] <= _bound(ladder, current) + h:
        return current
    for i in range(current + 1, n):
        if loads[i] <= _bound(ladder, i) + h:
            return i
    return current


@dataclass(slots=True)
class AcceptanceWatch:
    """The first draft position's acceptance rate, pooled over requests by their draft
    steps (an exponential average of accepted and of drafts, their ratio), against the
    level it had at the last reset. Position 1 is drafted at every depth, so its rate
    does not move when the ladder changes rung; a sharp move says the traffic or the
    draft changed, and the load thresholds measured at the old rate no longer hold.

    Pooled, not a mean of per-request rates: a short response has a handful of draft
    steps, so its own rate is mostly binomial noise; the reference is the pooled rate
    of `warmup` requests."""

    threshold: float
    alpha: float = 0.02
    warmup: int = 200  # requests pooled (plain sums) before the reference is set
    accepted: float = 0.0
    drafts: float = 0.0
    reference: float | None = None
    seen: int = 0

    @property
    def rate(self) -> float | None:
        return self.accepted / self.drafts if self.drafts > 0 else None

    def observe(self, accepted: float, drafts: float = 1.0) -> bool:
        """Take one request's accepted count at position 1 and its draft steps (or a
        rate, with drafts 1); True when it moved the pooled rate more than `threshold`
        from the reference (which is then measured again, over another warmup)."""
        if drafts <= 0:
            return False
        self.seen += 1
        if self.seen <= self.warmup:
            self.accepted += accepted
            self.drafts += drafts
        else:
            self.accepted += self.alpha * (accepted - self.accepted)
            self.drafts += self.alpha * (drafts - self.drafts)
        if self.seen < self.warmup:
            return False
        rate = self.accepted / self.drafts
        if self.reference is None:
            self.reference = rate
            # from here on an average per request, not a sum: the same ratio
            self.accepted /= self.seen
            self.drafts /= self.seen
            return False
        if abs(rate - self.reference) > self.threshold:
            # NOTE: measured afresh (another warmup): the average is still on its way to
            # the new level, and a reference taken on the way would fire again on arrival.
            self.accepted, self.drafts, self.reference, self.seen = 0.0, 0.0, None, 0
            return True
        return False
