"""Acceptance of drafted tokens, estimated from the speculative-decoding counters.

Counters (one arm, summed over windows with `combine_windows`):

- drafts D: draft proposals, i.e. target verification passes that carried a draft.
- drafted_tokens: draft tokens proposed (k per draft for a fixed-length drafter).
- accepted_tokens A: draft tokens the target accepted.
- accepted_per_position n_i (i = 0..K-1): drafts whose token at position i was
  accepted. Verification stops at the first rejection, so position i can only
  be accepted when positions 0..i-1 were: n_0 >= n_1 >= ... and sum(n_i) = A.

Statistics:

- Conditional acceptance at position i, r_i = n_i / n_{i-1} with n_{-1} = D:
  P(position i accepted | positions < i accepted); None when no draft reached
  position i. The raw ratio A / drafted_tokens is NOT an acceptance rate: its
  denominator counts draft tokens after the first rejection, which the target
  never judged, so it understates acceptance (iid alpha = 0.8, k = 4 gives a
  raw ratio of 0.59). It is reported only for comparison.
- Reach rate at position i, n_i / D = prod_{j<=i} r_j: P(the first i+1 draft
  tokens are all accepted).
- Pooled alpha, the parameter of the iid closed forms: the maximum-likelihood
  estimate under "every judged position is accepted independently with
  probability alpha". Successes A over judged positions
  T = sum_{i<K} n_{i-1} = D + A - n_{K-1}; alpha = A / T, with a Wilson score
  interval on (A, T). Without per-position counters it falls back to the
  method of moments: solve sum_{i=1..k} alpha^i = A / D with k = drafted / D.
- Mean acceptance length 1 + A / D: tokens emitted per target pass, the
  accepted draft tokens plus the one token the target always emits (the
  correction after a rejection, or the bonus token after a full acceptance).
- Expected tokens per target pass for length k:
  tau(k) = 1 + sum_{i=1..k} prod_{j<i} r_j; for iid alpha,
  (1 - alpha^(k+1)) / (1 - alpha), and k + 1 at alpha = 1.
- Expected speedup for the cost ratio c = (one draft step) / (one target pass):
  tau(k) / (1 + k c); for iid alpha, (1 - alpha^(k+1)) / ((1 - alpha)(1 + k c)).

Assumptions: every draft proposes the same k tokens (per-position counters
pool drafts of a single length); a target pass costs the same whatever the
number of tokens it verifies (memory-bound decode); drafting cost is linear in
k; batching and scheduling overheads are ignored. The iid forms additionally
assume acceptance does not depend on the position.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict
from scipy import optimize, stats

from control.stats.errors import InconsistentCountersError, InsufficientSamplesError, StatsError
from specwire.heartbeat import SpecCounters


class AcceptanceSource(Protocol):
    """Anything carrying the acceptance counters: `TelemetryWindow`, `WindowTotals`."""

    @property
    def drafts(self) -> int: ...
    @property
    def drafted_tokens(self) -> int: ...
    @property
    def accepted_tokens(self) -> int: ...
    @property
    def accepted_per_position(self) -> Sequence[int]: ...


@dataclass(frozen=True, slots=True)
class AcceptanceCounts:
    """Validated acceptance counters of one arm; raises `InconsistentCountersError`."""

    drafts: int
    drafted_tokens: int
    accepted_tokens: int
    accepted_per_position: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if (
            min(
                self.drafts,
                self.drafted_tokens,
                self.accepted_tokens,
                0,
                *self.accepted_per_position,
            )
            < 0
        ):
            raise InconsistentCountersError("acceptance counters must be non-negative")
        if self.accepted_tokens > self.drafted_tokens:
            raise InconsistentCountersError(
                f"accepted_tokens {self.accepted_tokens} > drafted_tokens {self.drafted_tokens}"
            )
        if self.drafted_tokens > 0 and self.drafts == 0:
            raise InconsistentCountersError("drafted tokens without any draft")
        previous = self.drafts
        for i, n in enumerate(self.accepted_per_position):
            if n > previous:
                # NOTE: verification stops at the first rejection, so deeper
                # positions can never be accepted more often than shallower ones.
                raise InconsistentCountersError(
                    f"accepted_per_position[{i}] = {n} exceeds the {previous} drafts reaching it"
                )
            previous = n
        if self.accepted_per_position and sum(self.accepted_per_position) != self.accepted_tokens:
            raise InconsistentCountersError(
                f"accepted_per_position sums to {sum(self.accepted_per_position)}, "
                f"accepted_tokens is {self.accepted_tokens}"
            )

    @classmethod
    def of(cls, source: AcceptanceSource) -> AcceptanceCounts:
        return cls(
            drafts=source.drafts,
            drafted_tokens=source.drafted_tokens,
            accepted_tokens=source.accepted_tokens,
            accepted_per_position=tuple(source.accepted_per_position),
        )

    @classmethod
    def from_spec_counters(cls, counters: SpecCounters) -> AcceptanceCounts:
        """From an engine heartbeat (pass the difference of two cumulative readings)."""
        return cls(
            drafts=counters.num_drafts,
            drafted_tokens=counters.num_draft_tokens,
            accepted_tokens=counters.num_accepted_tokens,
            accepted_per_position=tuple(counters.accepted_per_position),
        )

    @property
    def num_positions(self) -> int:
        """Speculative length k: from the per-position counters, else drafted / drafts."""
        if self.accepted_per_position:
            return len(self.accepted_per_position)
        if self.drafts == 0:
            return 0
        return max(1, round(self.drafted_tokens / self.drafts))

    @property
    def position_trials(self) -> int | None:
        """Judged draft positions D + A - n_{K-1}; None without per-position counters."""
        if not self.accepted_per_position:
            return None
        return self.drafts + self.accepted_tokens - self.accepted_per_position[-1]


class AcceptanceEstimate(BaseModel):
    """Acceptance statistics of one arm, with the counts they come from (decision evidence)."""

    model_config = ConfigDict(frozen=True)

    drafts: int
    drafted_tokens: int
    accepted_tokens: int
    num_positions: int
    position_trials: int | None
    conditional_rates: tuple[float | None, ...]
    reach_rates: tuple[float | None, ...]
    alpha: float | None
    alpha_lower: float | None
    alpha_upper: float | None
    alpha_method: Literal["per_position_mle", "moments"] | None
    confidence: float
    raw_acceptance_ratio: float | None
    mean_acceptance_length: float | None


def wilson_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when there are no trials."""
    if trials == 0:
        return 0.0, 1.0
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return max(0.0, centre - half), min(1.0, centre + half)


def alpha_from_mean_accepted(mean_accepted: float, k: int) -> float:
    """Method of moments: the iid alpha with sum_{i=1..k} alpha^i = mean accepted per draft."""
    if k < 1:
        raise InsufficientSamplesError("speculative length must be at least 1")
    if mean_accepted <= 0:
        return 0.0
    if mean_accepted >= k:
        return 1.0

    def excess(a: float) -> float:
        return sum(a**i for i in range(1, k + 1)) - mean_accepted

    # The left side rises strictly from 0 (alpha=0) to k (alpha=1): one root.
    return float(optimize.brentq(excess, 0.0, 1.0, xtol=1e-14))


def estimate_acceptance(
    counts: AcceptanceCounts | AcceptanceSource, confidence: float = 0.95
) -> AcceptanceEstimate:
    """All acceptance statistics of one arm; None entries mean "no evidence" (zero drafts)."""
    c = counts if isinstance(counts, AcceptanceCounts) else AcceptanceCounts.of(counts)
    k = c.num_positions
    conditional: list[float | None] = []
    reach: list[float | None] = []
    previous = c.drafts
    for n in c.accepted_per_position:
        conditional.append(n / previous if previous > 0 else None)
        reach.append(n / c.drafts if c.drafts > 0 else None)
        previous = n

    alpha: float | None = None
    lower: float | None = None
    upper: float | None = None
    method: Literal["per_position_mle", "moments"] | None = None
    trials = c.position_trials
    if trials is not None and trials > 0:
        alpha = c.accepted_tokens / trials
        lower, upper = wilson_interval(c.accepted_tokens, trials, confidence)
        method = "per_position_mle"
    elif trials is None and c.drafts > 0:
        alpha = alpha_from_mean_accepted(c.accepted_tokens / c.drafts, k)
        method = "moments"

    return AcceptanceEstimate(
        drafts=c.drafts,
        drafted_tokens=c.drafted_tokens,
        accepted_tokens=c.accepted_tokens,
        num_positions=k,
        position_trials=trials,
        conditional_rates=tuple(conditional),
        reach_rates=tuple(reach),
        alpha=alpha,
        alpha_lower=lower,
        alpha_upper=upper,
        alpha_method=method,
        confidence=confidence,
        raw_acceptance_ratio=(
            c.accepted_tokens / c.drafted_tokens if c.drafted_tokens > 0 else None
        ),
        mean_acceptance_length=1 + c.accepted_tokens / c.drafts if c.drafts > 0 else None,
    )


def expected_tokens_per_pass_iid(alpha: float, k: int) -> float:
    """(1 - alpha^(k+1)) / (1 - alpha): tokens per target pass with iid acceptance."""
    _check_rate(alpha)
    _check_length(k)
    if alpha == 1.0:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def expected_speedup_iid(alpha: float, k: int, cost_ratio: float) -> float:
    """(1 - alpha^(k+1)) / ((1 - alpha)(1 + k c)): speedup over plain decoding."""
    _check_cost(cost_ratio)
    return expected_tokens_per_pass_iid(alpha, k) / (1 + k * cost_ratio)


def expected_tokens_per_pass(
    conditional_rates: Sequence[float | None], k: int, fill_rate: float | None = None
) -> float:
    """1 + sum_{i=1..k} prod_{j<i} r_j from per-position conditional rates.

    Positions beyond the measured ones use `fill_rate` (typically the pooled
    alpha); without it, asking for more positions than measured is an error.
    A None rate (position never reached) only occurs after a zero reach rate,
    so it contributes nothing.
    """
    _check_length(k)
    if k > len(conditional_rates) and fill_rate is None:
        raise InsufficientSamplesError(
            f"k={k} exceeds the {len(conditional_rates)} measured positions and no fill rate"
        )
    tokens = 1.0
    reach = 1.0
    for i in range(k):
        rate = conditional_rates[i] if i < len(conditional_rates) else fill_rate
        rate = 0.0 if rate is None else rate
        _check_rate(rate)
        reach *= rate
        tokens += reach
    return tokens


def expected_speedup(
    conditional_rates: Sequence[float | None],
    k: int,
    cost_ratio: float,
    fill_rate: float | None = None,
) -> float:
    """tau(k) / (1 + k c) from per-position conditional rates (general form)."""
    _check_cost(cost_ratio)
    return expected_tokens_per_pass(conditional_rates, k, fill_rate) / (1 + k * cost_ratio)


def _check_rate(rate: float) -> None:
    if not 0.0 <= rate <= 1.0:
        raise StatsError(f"acceptance rate {rate} outside [0, 1]")


def _check_length(k: int) -> None:
    if k < 0:
        raise StatsError(f"speculative length {k} is negative")


def _check_cost(cost_ratio: float) -> None:
    if not cost_ratio >= 0.0:
        raise StatsError(f"cost ratio {cost_ratio} must be >= 0")
