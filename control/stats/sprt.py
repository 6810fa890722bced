"""Wald's sequential probability ratio test (SPRT) on draft-token acceptance.

Judges a segment's drafter as soon as the evidence suffices, instead of after
a fixed sample: H0 "acceptance rate p >= p0" (acceptable) against H1
"p <= p1" (unacceptable), p1 < p0.

Observations are judged draft positions, one Bernoulli trial each (success =
accepted): successes A = accepted_tokens and trials T = D + A - n_{K-1} (see
`acceptance.py`), cumulative since the test started. The log-likelihood ratio
of H1 against H0 is

    LLR = A ln(p1 / p0) + (T - A) ln((1 - p1) / (1 - p0)).

Wald's boundaries: LLR >= a = ln((1 - beta) / alpha) rejects H0 (unacceptable:
disable); LLR <= b = ln(beta / (1 - alpha)) accepts H0 (acceptable); in
between the test continues. alpha = P(reject | p = p0) is the false-disable
rate, beta = P(accept | p = p1) the rate of missing a bad drafter. The
likelihood ratio is monotone in p, so both errors are smaller for rates
beyond the boundaries, and the boundaries keep the errors at or below about
alpha and beta (Wald: alpha' <= alpha / (1 - beta)).

No decision is taken on fewer than `min_trials` trials, whatever the LLR says:
the first requests of a canary are rarely representative (one long prompt can
dominate them). Waiting longer never raises the error rates much, it mostly
lowers them; the same holds for the overshoot of evaluating once per window.

Expected trials (Wald): E_p[T] ~ (L(p) b + (1 - L(p)) a) / E_p[z], where z is
one trial's LLR increment and L(p) = (A^h - 1) / (A^h - B^h) the probability
of accepting H0, with A = e^a, B = e^b and h != 0 solving E_p[e^(h z)] = 1
(h = 1 at p0, h = -1 at p1); at the rate where E_p[z] = 0, E_p[T] ~ -a b / E_p[z^2].

Assumption: trials are independent. Positions within one draft, and tokens
within one request, are positively correlated in practice (easy prompts accept
more), which widens the real variance: error rates can exceed the nominal ones
when a few requests dominate a window. `min_trials` and the window cadence are
the mitigation; this is the test's main open risk.
"""

from __future__ import annotations

import math
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator
from scipy import optimize

from control.stats.acceptance import AcceptanceCounts, AcceptanceSource
from control.stats.errors import InsufficientSamplesError


class SprtDecision(StrEnum):
    ACCEPT = "accept"  # H0: acceptance is acceptable
    REJECT = "reject"  # H1: acceptance is unacceptable
    CONTINUE = "continue"  # not enough evidence yet


_CODE_TO_DECISION = {1: SprtDecision.REJECT, -1: SprtDecision.ACCEPT, 0: SprtDecision.CONTINUE}


class SprtConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    acceptable_rate: float = Field(gt=0, lt=1, description="p0: H0 is rate >= p0.")
    unacceptable_rate: float = Field(gt=0, lt=1, description="p1: H1 is rate <= p1, p1 < p0.")
    alpha: float = Field(default=0.05, gt=0, lt=0.5, description="P(reject | rate = p0).")
    beta: float = Field(default=0.05, gt=0, lt=0.5, description="P(accept | rate = p1).")
    min_trials: int = Field(default=200, ge=1, description="No decision on fewer trials.")

    @model_validator(mode="after")
    def _ordered(self) -> SprtConfig:
        if self.unacceptable_rate >= self.acceptable_rate:
            raise ValueError("unacceptable_rate must be below acceptable_rate")
        return self

    @property
    def upper_boundary(self) -> float:
        """a = ln((1 - beta) / alpha): at or above, reject H0."""
        return math.log((1 - self.beta) / self.alpha)

    @property
    def lower_boundary(self) -> float:
        """b = ln(beta / (1 - alpha)): at or below, accept H0."""
        return math.log(self.beta / (1 - self.alpha))

    @property
    def success_step(self) -> float:
        """LLR increment of an accepted position, ln(p1 / p0) < 0."""
        return math.log(self.unacceptable_rate / self.acceptable_rate)

    @property
    def failure_step(self) -> float:
        """LLR increment of a rejected position, ln((1 - p1) / (1 - p0)) > 0."""
        return math.log((1 - self.unacceptable_rate) / (1 - self.acceptable_rate))

    def llr(self, successes: ArrayLike, trials: ArrayLike) -> NDArray[np.float64]:
        """Log-likelihood ratio H1 : H0, elementwise over any array shape."""
        s = np.asarray(successes, dtype=np.float64)
        t = np.asarray(trials, dtype=np.float64)
        return s * self.success_step + (t - s) * self.failure_step

    def decide_many(self, successes: ArrayLike, trials: ArrayLike) -> NDArray[np.int8]:
        """Decision codes elementwise: +1 reject, -1 accept, 0 continue.

        One vectorized implementation serves both `sprt_test` and simulations.
        """
        llr = self.llr(successes, trials)
        ready = np.asarray(trials) >= self.min_trials
        codes = np.zeros(llr.shape, dtype=np.int8)
        codes[ready & (llr >= self.upper_boundary)] = 1
        codes[ready & (llr <= self.lower_boundary)] = -1
        return codes


class SprtResult(BaseModel):
    """One SPRT evaluation with everything needed as decision evidence."""

    model_config = ConfigDict(frozen=True)

    decision: SprtDecision
    llr: float
    lower_boundary: float
    upper_boundary: float
    successes: int
    trials: int
    min_trials: int
    observed_rate: float | None
    acceptable_rate: float
    unacceptable_rate: float
    alpha: float
    beta: float


def sprt_test(successes: int, trials: int, config: SprtConfig) -> SprtResult:
    """Evaluate the SPRT on cumulative successes / trials."""
    if not 0 <= successes <= trials:
        raise InsufficientSamplesError(f"need 0 <= successes ({successes}) <= trials ({trials})")
    code = int(config.decide_many(successes, trials))
    return SprtResult(
        decision=_CODE_TO_DECISION[code],
        llr=float(config.llr(successes, trials)),
        lower_boundary=config.lower_boundary,
        upper_boundary=config.upper_boundary,
        successes=successes,
        trials=trials,
        min_trials=config.min_trials,
        observed_rate=successes / trials if trials else None,
        acceptable_rate=config.acceptable_rate,
        unacceptable_rate=config.unacceptable_rate,
        alpha=config.alpha,
        beta=config.beta,
    )


def sprt_acceptance(counts: AcceptanceCounts | AcceptanceSource, config: SprtConfig) -> SprtResult:
    """SPRT on an arm's acceptance counters (needs the per-position counters)."""
    c = counts if isinstance(counts, AcceptanceCounts) else AcceptanceCounts.of(counts)
    trials = c.position_trials
    if trials is None:
        # NOTE: without per-position counters the number of judged positions is
        # unknown (tokens after the first rejection were never judged), so the
        # Bernoulli likelihood cannot be written down.
        raise InsufficientSamplesError("the SPRT needs accepted_per_position counters")
    return sprt_test(c.accepted_tokens, trials, config)


def operating_characteristic(config: SprtConfig, rate: float) -> float:
    """Wald's approximation of P(accept H0) when the true acceptance rate is `rate`."""
    h = _wald_h(config, rate)
    if h == 0.0:
        a, b = config.upper_boundary, config.lower_boundary
        return a / (a - b)
    big_a = h * config.upper_boundary
    big_b = h * config.lower_boundary
    return float(math.expm1(big_a) / (math.exp(big_a) - math.exp(big_b)))


def wald_expected_trials(config: SprtConfig, rate: float) -> float:
    """Wald's approximation of the expected number of trials to a decision at `rate`."""
    if not 0 < rate < 1:
        raise ValueError("rate must be in (0, 1)")
    a, b = config.upper_boundary, config.lower_boundary
    drift = rate * config.success_step + (1 - rate) * config.failure_step
    if _wald_h(config, rate) == 0.0:
        second = rate * config.success_step**2 + (1 - rate) * config.failure_step**2
        return -a * b / second
    accept = operating_characteristic(config, rate)
    return (accept * b + (1 - accept) * a) / drift


def _wald_h(config: SprtConfig, rate: float) -> float:
    """Non-zero root h of rate * r1^h + (1 - rate) * r2^h = 1; 0 when the drift vanishes."""
    s, f = config.success_step, config.failure_step
    drift = rate * s + (1 - rate) * f
    if abs(drift) < 1e-12:
        return 0.0

    def mgf_minus_one(h: float) -> float:
        return rate * math.exp(h * s) + (1 - rate) * math.exp(h * f) - 1

    # The moment generating function is convex with value 1 at h = 0 and slope
    # `drift` there, so the other root lies on the side opposite to the drift.
    direction = -1.0 if drift > 0 else 1.0
    near = direction * 1e-9
    far = direction * 1.0
    while mgf_minus_one(far) < 0:
        far *= 2
    return float(optimize.brentq(mgf_minus_one, min(near, far), max(near, far), xtol=1e-14))
