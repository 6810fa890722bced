"""Sequential tests that stay valid however often they are looked at.

The automation re-reads a rollout's evidence every guard tick (15 s) and every
evaluation (60 s), for as long as the rollout is exposed. A fixed-sample test
looked at that often rejects a true null far more often than its level says
(the reason issue 10's null scenario was disabled in 19 % of runs). Every test
that can flip a rollout is therefore built on a nonnegative supermartingale
under its null, so Ville's inequality bounds the chance that it *ever* crosses
its boundary, whenever and however often it is read:

- **Page's CUSUM on Gaussian log-likelihood ratios** (change detection: a
  regression that starts mid-stage or after `full`). The data arrive as blocks
  b = 1, 2, ... each with an estimate x_b of the effect (e.g. the load-matched
  log slowdown of the spec arm) and its variance v_b. For the null "effect <=
  mu0" against the shifted alternative "effect = mu0 + d" one block's log
  likelihood ratio is

      l_b(d) = (d / v_b) * (x_b - mu0 - d / 2),

  and the CUSUM is S_b = max(0, S_{b-1} + l_b). S_b >= h means that the SPRT
  started at *some* earlier block has crossed h. Under the null, each of those
  SPRTs crosses with probability <= e^-h (Ville), so over a horizon of H blocks
  and J design shifts d_1..d_J (run side by side, because the size of a real
  regression is unknown) the chance of any false alarm is <= H J e^-h. The
  threshold h = ln(H J / alpha) spends exactly the budget alpha.
- **The normal-mixture confidence sequence** (Robbins) for an effect estimated
  from blocks with inverse-variance weights: with information I = sum 1 / v_b
  and estimate theta_hat = sum(x_b / v_b) / I, the mixture over effects
  N(0, rho^2) of the likelihood ratios is a martingale, and

      |theta_hat - theta| <= sqrt(2 (1 + I rho^2) / (I^2 rho^2)
                                   * (ln(1 / alpha) + ln(1 + I rho^2) / 2))

  holds for all blocks simultaneously with probability >= 1 - alpha. Promotion
  asks that its lower end clear `min_speedup`.

Assumption: the block estimates are independent and close to Gaussian with the
stated variances (each block holds at least `min_block_requests` requests per
arm, and a mean of log latencies or of errors over that many requests is).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict

from control.stats.errors import StatsError


@dataclass(frozen=True, slots=True)
class BlockEstimate:
    """One block's estimate of the effect and its variance (> 0)."""

    estimate: float
    variance: float
    first_slot: int  # index of the first time slot (window start) in the block
    last_slot: int


class CusumResult(BaseModel):
    """A CUSUM monitor's state after the last complete block, as decision evidence."""

    model_config = ConfigDict(frozen=True)

    null_value: float
    shifts: tuple[float, ...]
    alpha: float
    horizon_blocks: int
    threshold: float
    blocks: int
    statistic: float  # max over the shifts of S at the last block
    peak: float  # max over blocks and shifts (what the alarm compares)
    alarm: bool
    alarm_block: int | None  # 0-based block index of the first crossing
    alarm_shift: float | None
    last_estimate: float | None

    @property
    def budget_spent(self) -> float:
        """Share of the horizon's budget spent so far (each block starts one more SPRT)."""
        return min(self.blocks / self.horizon_blocks, 1.0) * self.alpha


def cusum_threshold(alpha: float, horizon_blocks: int, shifts: int) -> float:
    """h = ln(H J / alpha): P(any false alarm within H blocks) <= alpha."""
    if not 0 < alpha < 1:
        raise StatsError(f"alpha {alpha} must lie in (0, 1)")
    if horizon_blocks < 1 or shifts < 1:
        raise StatsError("the horizon and the number of shifts must be at least 1")
    return math.log(horizon_blocks * shifts / alpha)


def gaussian_cusum(
    blocks: Sequence[BlockEstimate],
    *,
    null_value: float,
    shifts: Sequence[float],
    alpha: float,
    horizon_blocks: int,
) -> CusumResult:
    """Page's CUSUM for "effect > null_value", one per design shift, Bonferroni over shifts."""
    if not shifts or min(shifts) <= 0:
        raise StatsError("design shifts must be positive")
    threshold = cusum_threshold(alpha, horizon_blocks, len(shifts))
    sums = [0.0] * len(shifts)
    peak = 0.0
    alarm_block: int | None = None
    alarm_shift: float | None = None
    for index, block in enumerate(blocks):
        if block.variance <= 0:
            raise StatsError(f"block {index} has non-positive variance {block.variance}")
        centred = block.estimate - null_value
        for j, shift in enumerate(shifts):
            llr = shift / block.variance * (centred - shift / 2)
            sums[j] = max(0.0, sums[j] + llr)
            if sums[j] > peak:
                peak = sums[j]
            if alarm_block is None and sums[j] >= threshold:
                alarm_block, alarm_shift = index, shift
    return CusumResult(
        null_value=null_value,
        shifts=tuple(shifts),
        alpha=alpha,
        horizon_blocks=horizon_blocks,
        threshold=threshold,
        blocks=len(blocks),
        statistic=max(sums) if blocks else 0.0,
        peak=peak,
        alarm=alarm_block is not None,
        alarm_block=alarm_block,
        alarm_shift=alarm_shift,
        last_estimate=blocks[-1].estimate if blocks else None,
    )


def llr_cusum(increments: Sequence[float], threshold: float) -> tuple[float, float, int | None]:
    """CUSUM over ready-made log-likelihood-ratio increments: (last S, peak, first alarm)."""
    total, peak = 0.0, 0.0
    first: int | None = None
    for index, llr in enumerate(increments):
        total = max(0.0, total + llr)
        peak = max(peak, total)
        if first is None and total >= threshold:
            first = index
    return total, peak, first


class ConfidenceSequence(BaseModel):
    """An always-valid interval for an effect from inverse-variance weighted blocks."""

    model_config = ConfigDict(frozen=True)

    estimate: float
    lower: float
    upper: float
    information: float  # sum of 1 / variance
    blocks: int
    alpha: float
    mixture_scale: float
    # True: `lower` and `upper` are each an always-valid one-sided bound at `alpha` (the
    # pair as an interval holds at 2 alpha); False: the interval holds at `alpha`.
    one_sided: bool = False


def mixture_radius(information: float, alpha: float, mixture_scale: float) -> float:
    """Half-width of the normal-mixture confidence sequence at `information` (see above)."""
    if information <= 0:
        return math.inf
    if not 0 < alpha < 1 or mixture_scale <= 0:
        raise StatsError("need 0 < alpha < 1 and a positive mixture scale")
    ir2 = information * mixture_scale**2
    return math.sqrt(
        2 * (1 + ir2) / (information * ir2) * (math.log(1 / alpha) + math.log1p(ir2) / 2)
    )


def one_sided_mixture_radius(information: float, alpha: float, mixture_scale: float) -> float:
    """Distance of the always-valid one-sided bound at `information` from the estimate.

    The half-normal mixture over lambda >= 0 of exp(lambda S - lambda^2 V / 2), with S =
    information * (estimate - effect) and V = information, is a non-negative martingale
    of mean 1 under the effect: 2 (1 + r)^-1/2 exp(rho^2 S^2 / (2 (1 + r))) Phi(rho S /
    sqrt(1 + r)) with r = rho^2 V, rho = mixture_scale (Howard et al. 2021, one-sided
    normal mixture). By Ville's inequality it exceeds 1 / alpha with chance at most
    alpha, ever: the S where it equals 1 / alpha, over V, is the radius. Narrower than
    the two-sided mixture_radius at the same alpha (at 1 / alpha, not 2 / alpha, roughly).
    """
    two_sided = mixture_radius(information, alpha, mixture_scale)
    if math.isinf(two_sided):
        return two_sided
    r = mixture_scale**2 * information
    log_target = math.log(1 / alpha)

    def log_martingale(radius: float) -> float:
        s = information * radius
        z = mixture_scale * s / math.sqrt(1 + r)
        return (
            math.log(2.0)
            - 0.5 * math.log1p(r)
            + z * z / 2
            + math.log(max(0.5 * math.erfc(-z / math.sqrt(2)), 1e-300))
        )

    low, high = 0.0, two_sided  # the martingale at the two-sided radius is above 1 / alpha
    for _ in range(100):
        middle = (low + high) / 2
        if log_martingale(middle) >= log_target:
            high = middle
        else:
            low = middle
    return high


def confidence_sequence(
    blocks: Sequence[BlockEstimate],
    *,
    alpha: float,
    mixture_scale: float,
    one_sided: bool = False,
) -> ConfidenceSequence | None:
    """Inverse-variance weighted estimate with its always-valid interval; None without
    blocks. `one_sided`: each end an always-valid one-sided bound at `alpha`, for a test
    that reads one side only (non-inferiority)."""
    if not blocks:
        return None
    information = sum(1 / b.variance for b in blocks)
    estimate = sum(b.estimate / b.variance for b in blocks) / information
    width = one_sided_mixture_radius if one_sided else mixture_radius
    radius = width(information, alpha, mixture_scale)
    return ConfidenceSequence(
        estimate=estimate,
        lower=estimate - radius,
        upper=estimate + radius,
        information=information,
        blocks=len(blocks),
        alpha=alpha,
        mixture_scale=mixture_scale,
        one_sided=one_sided,
    )


class RateExceedance(BaseModel):
    """Whether a Bernoulli rate provably exceeds `allowed_rate`, read at any time."""

    model_config = ConfigDict(frozen=True)

    allowed_rate: float
    alpha: float
    trials: int
    failures: int
    observed_rate: float | None
    log_evidence: float  # ln of the mixture likelihood ratio (0 before any trial)
    threshold: float  # ln(1 / alpha)
    alarm: bool
    alternatives: tuple[float, ...]


# The alternative rates of the mixture, as multiples of the allowed rate (capped below 1).
RATE_MULTIPLES = (2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
# From an allowed rate of 1/2 up, the alternatives divide the allowed rate of the other
# outcome instead: q = 1 - (1 - allowed) / m (multiples of the allowed rate would all
# be capped at 0.99, too far to detect a rate just above it).
HIGH_RATE_DIVISORS = (1.25, 1.6, 2.0, 3.0, 4.0, 8.0)


def rate_alternatives(allowed_rate: float) -> tuple[float, ...]:
    """The mixture's alternative rates above the allowed rate, below 1: RATE_MULTIPLES
    of it below 1/2, HIGH_RATE_DIVISORS of its complement from 1/2 up."""
    if allowed_rate >= 0.5:
        found = {1.0 - (1.0 - allowed_rate) / m for m in HIGH_RATE_DIVISORS}
    else:
        found = {min(allowed_rate * m, 0.99) for m in RATE_MULTIPLES}
    return tuple(sorted(q for q in found if allowed_rate < q < 1.0))


def rate_log_evidence(
    failures: ArrayLike, trials: ArrayLike, allowed_rate: float
) -> NDArray[np.float64]:
    """ln of the mixture likelihood ratio of `rate_exceedance`, elementwise."""
    k = np.asarray(failures, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    qs = np.asarray(rate_alternatives(allowed_rate))
    shape = (len(qs),) + (1,) * k.ndim
    q = qs.reshape(shape)
    logs = k * np.log(q / allowed_rate) + (n - k) * np.log((1 - q) / (1 - allowed_rate))
    top = logs.max(axis=0)
    result: NDArray[np.float64] = top + np.log(np.exp(logs - top).mean(axis=0))
    return result


def rate_exceedance(
    failures: int, trials: int, *, allowed_rate: float, alpha: float
) -> RateExceedance:
    """One-sided sequential test of "rate > allowed_rate" on cumulative Bernoulli counts.

    The statistic is the average, over alternatives q_j > p0 (`rate_alternatives`), of
    the likelihood ratios

        L_j = (q_j / p0)^failures ((1 - q_j) / (1 - p0))^(trials - failures),  p0 = allowed.

    For a true rate p <= p0 and q > p0 one trial's factor has mean p q / p0 + (1 - p)(1 -
    q) / (1 - p0) <= 1, so each L_j, and their average, is a nonnegative supermartingale
    of mean <= 1: by Ville's inequality the chance that it ever reaches 1 / alpha, however
    often it is read, is at most alpha. The counts are exact (a binomial, not a Gaussian
    approximation), which matters at the small rates this watches (a few mismatches).
    """
    if not 0 < allowed_rate < 1:
        raise StatsError(f"allowed_rate {allowed_rate} must lie in (0, 1)")
    if not 0 < alpha < 1:
        raise StatsError(f"alpha {alpha} must lie in (0, 1)")
    if trials < 0 or not 0 <= failures <= trials:
        raise StatsError(f"need 0 <= failures ({failures}) <= trials ({trials})")
    alternatives = rate_alternatives(allowed_rate)
    log_evidence = float(rate_log_evidence(failures, trials, allowed_rate))
    threshold = math.log(1 / alpha)
    return RateExceedance(
        allowed_rate=allowed_rate,
        alpha=alpha,
        trials=trials,
        failures=failures,
        observed_rate=failures / trials if trials else None,
        log_evidence=log_evidence,
        threshold=threshold,
        alarm=log_evidence >= threshold,
        alternatives=alternatives,
    )
