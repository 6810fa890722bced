"""The false-alarm budget: how it is split over the families that can flip a rollout.

One false-alarm budget (`false_alarm_rate` over `false_alarm_horizon_windows`)
is split evenly over the five families that can flip a rollout: acceptance,
latency, errors, the output contract, and promotion (the last shared by the
rollout's stages).
"""

from control.models import ThresholdSet
from control.stats import SprtConfig

FAMILIES = ("acceptance", "latency", "errors", "contract", "promotion")
# Level of the error-rate non-inferiority bound promotion needs: the chance that a pair
# whose errors are worse than the margin ever passes this check, per stage, is at most
# this (the error CUSUM keeps watching after). NOTE: not the promotion family's share of
# the false-alarm budget (about 0.0005 at the defaults): at that level a 1 % canary of
# 200 requests/s would need ~4,000 spec requests to show "not worse by 1 point".
NONINFERIORITY_ALPHA = 0.05


def sprt_config(thresholds: ThresholdSet) -> SprtConfig:
    """H1: acceptance <= min_acceptance_rate; H0: >= min + acceptance_indifference."""
    unacceptable = thresholds.min_acceptance_rate
    return SprtConfig(
        acceptable_rate=unacceptable + thresholds.acceptance_indifference,
        unacceptable_rate=unacceptable,
        alpha=family_alpha(thresholds),
        beta=thresholds.sprt_beta,
        min_trials=max(thresholds.min_samples, 1),
    )


def family_alpha(thresholds: ThresholdSet) -> float:
    return thresholds.false_alarm_rate / len(FAMILIES)


def promotion_alpha(thresholds: ThresholdSet, stages: list[float]) -> float:
    return family_alpha(thresholds) / max(len(stages), 1)


def spent(blocks: int, thresholds: ThresholdSet, alpha: float) -> float:
    """The share of `alpha` a monitor that has read `blocks` blocks has used."""
    return min(blocks / thresholds.false_alarm_horizon_windows, 1.0) * alpha
