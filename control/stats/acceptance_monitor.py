"""The acceptance monitor: Wald's SPRT with the request, not the draft position, as unit.

Hypotheses come from the threshold set with an explicit indifference zone
above the minimum: H1 "rate <= p1 = min_acceptance_rate" (unacceptable) against
H0 "rate >= p0 = p1 + acceptance_indifference" (acceptable). A pair whose rate
is below the minimum is on H1's side, so it is disabled with probability
>= 1 - beta; one at or above p0 is disabled with probability <= alpha.

**Within-request correlation.** Draft positions of one request are not
independent trials: an easy prompt accepts nearly everything, a hard one
little. With a_r accepted out of t_r judged positions in request r, the
variance of sum a_r - p sum t_r is sum (a_r - p t_r)^2 (requests are
independent), not the binomial p (1 - p) sum t_r. Their ratio, the design
effect

    deff = n / (n - 1) * sum (a_r - p t_r)^2 / (p (1 - p) sum t_r)    (>= 1),

is computed from per-request moments the gateway sends (sum a^2, sum a t,
sum t^2), and every log-likelihood ratio is divided by it (quasi-likelihood):
38 requests holding 5,241 positions with deff 40 weigh like 131 positions,
not 5,241.

**Repeated looks.** The reject side is Page's CUSUM over blocks of at least
`min_block_requests` requests, threshold ln(H / alpha): valid however often it is
read, and it still catches a collapse that starts late (a plain SPRT would
first have to climb back from the evidence of the good period). The accept
side (needed for promotion) is the cumulative LLR at or below Wald's
ln(beta / (1 - alpha)), with at least `min_requests` requests.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict

from control.stats.panel import ACCEPTANCE_FIELDS, ArmPanel
from control.stats.sequential import cusum_threshold, llr_cusum
from control.stats.sprt import SprtConfig, SprtDecision

_REQUESTS, _JUDGED, _ACCEPTED, _ACC_SQ, _ACC_JUDGED, _JUDGED_SQ = range(len(ACCEPTANCE_FIELDS))


class AcceptanceMonitor(BaseModel):
    model_config = ConfigDict(frozen=True)

    decision: SprtDecision
    acceptable_rate: float
    unacceptable_rate: float
    alpha: float
    beta: float
    requests: int
    min_requests: int
    judged_positions: int
    accepted: int
    observed_rate: float | None
    design_effect: float
    effective_positions: float
    blocks: int
    cusum_statistic: float
    cusum_peak: float
    reject_threshold: float
    alarm_block: int | None
    cumulative_llr: float
    accept_boundary: float
    increments: list[float]


def design_effect(sums: NDArray[np.int64]) -> float:
    """deff of the per-request acceptance moments [ACCEPTANCE_FIELDS] (1 when undefined)."""
    assert sums.shape == (len(ACCEPTANCE_FIELDS),), sums.shape
    n, judged, accepted = int(sums[_REQUESTS]), float(sums[_JUDGED]), float(sums[_ACCEPTED])
    if n < 2 or judged <= 0:
        return 1.0
    p = accepted / judged
    if p <= 0.0 or p >= 1.0:
        return 1.0
    residual = (
        float(sums[_ACC_SQ]) - 2 * p * float(sums[_ACC_JUDGED]) + p * p * float(sums[_JUDGED_SQ])
    )
    return max(n / (n - 1) * residual / (p * (1 - p) * judged), 1.0)


def _llr(config: SprtConfig, accepted: float, judged: float) -> float:
    return accepted * config.success_step + (judged - accepted) * config.failure_step


def monitor_acceptance(
    panel: ArmPanel,
    config: SprtConfig,
    *,
    horizon_blocks: int,
    min_block_requests: int,
) -> AcceptanceMonitor:
    """Judge the spec arm's acceptance over every slot of `panel`.

    config.min_trials is the minimum number of *requests* before accepting H0.
    """
    moments = panel.acceptance  # [T, fields]
    assert moments.shape == (panel.slots, len(ACCEPTANCE_FIELDS)), moments.shape
    totals = moments.sum(axis=0)  # [fields]
    deff = design_effect(totals)
    increments: list[float] = []
    block = np.zeros(len(ACCEPTANCE_FIELDS), dtype=np.int64)
    for t in range(panel.slots):
        block += moments[t]
        if block[_REQUESTS] >= min_block_requests:
            increments.append(_llr(config, block[_ACCEPTED], block[_JUDGED]) / deff)
            block[:] = 0
    threshold = cusum_threshold(config.alpha, horizon_blocks, 1)
    statistic, peak, alarm_block = llr_cusum(increments, threshold)
    requests, judged, accepted = (
        int(totals[_REQUESTS]),
        int(totals[_JUDGED]),
        int(totals[_ACCEPTED]),
    )
    cumulative = _llr(config, accepted, judged) / deff
    accept_boundary = math.log(config.beta / (1 - config.alpha))
    if alarm_block is not None:
        decision = SprtDecision.REJECT
    elif requests >= config.min_trials and cumulative <= accept_boundary:
        decision = SprtDecision.ACCEPT
    else:
        decision = SprtDecision.CONTINUE
    return AcceptanceMonitor(
        decision=decision,
        acceptable_rate=config.acceptable_rate,
        unacceptable_rate=config.unacceptable_rate,
        alpha=config.alpha,
        beta=config.beta,
        requests=requests,
        min_requests=config.min_trials,
        judged_positions=judged,
        accepted=accepted,
        observed_rate=accepted / judged if judged else None,
        design_effect=deff,
        effective_positions=judged / deff,
        blocks=len(increments),
        cusum_statistic=statistic,
        cusum_peak=peak,
        reject_threshold=threshold,
        alarm_block=alarm_block,
        cumulative_llr=cumulative,
        accept_boundary=accept_boundary,
        increments=increments,
    )
