"""All the evidence for one spec-vs-baseline comparison, in one call.

The canary and guard jobs compare the spec arm with the baseline arm of the
same segment over the same windows. This module runs every statistic on the
two arms' summed windows and returns them together; it takes no decision
(thresholds and state transitions belong to the jobs). A statistic whose
inputs are missing (an empty arm, no drafts, no per-position counters) is
None and named in `missing`, so a job can hold instead of failing.

The SPRT sees only the windows passed in: a job passes every window since the
test started (e.g. since the stage began), not just the latest one.

Multiple testing: TPOT, end-to-end latency and the error rate are three
one-sided tests, each at `level`. Under the null the chance that at least one
flags a regression is at most 3 x level (Bonferroni); a job that rolls back on
any single flag should pass level / 3 to keep the family-wise rate at level.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from control.stats.acceptance import AcceptanceCounts, AcceptanceEstimate, estimate_acceptance
from control.stats.errors import InsufficientSamplesError
from control.stats.latency import LatencyComparison, compare_latency
from control.stats.proportions import ProportionComparison, compare_error_rates
from control.stats.sprt import SprtConfig, SprtResult, sprt_acceptance
from control.stats.windows import WindowCounters, WindowTotals, combine_windows

T = TypeVar("T")


class ArmComparison(BaseModel):
    model_config = ConfigDict(frozen=True)

    spec_windows: int
    baseline_windows: int
    spec_requests: int
    baseline_requests: int
    acceptance: AcceptanceEstimate
    sprt: SprtResult | None
    tpot: LatencyComparison | None
    e2e: LatencyComparison | None
    errors: ProportionComparison | None
    missing: tuple[str, ...]


def compare_arms(
    spec: Iterable[WindowCounters],
    baseline: Iterable[WindowCounters],
    sprt: SprtConfig,
    level: float = 0.05,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> ArmComparison:
    """Sum each arm's windows and compute acceptance, SPRT, latency and error statistics."""
    s: WindowTotals = combine_windows(spec)
    b: WindowTotals = combine_windows(baseline)
    missing: list[str] = []
    counts = AcceptanceCounts.of(s)
    return ArmComparison(
        spec_windows=s.windows,
        baseline_windows=b.windows,
        spec_requests=s.requests,
        baseline_requests=b.requests,
        acceptance=estimate_acceptance(counts, confidence),
        sprt=_or_missing("sprt", missing, lambda: sprt_acceptance(counts, sprt)),
        tpot=_or_missing(
            "tpot",
            missing,
            lambda: compare_latency(s.tpot, b.tpot, "tpot", level, confidence, resamples, seed),
        ),
        e2e=_or_missing(
            "e2e",
            missing,
            lambda: compare_latency(s.e2e, b.e2e, "e2e", level, confidence, resamples, seed),
        ),
        errors=_or_missing(
            "errors",
            missing,
            lambda: compare_error_rates(s.errors, s.requests, b.errors, b.requests, level),
        ),
        missing=tuple(missing),
    )


def _or_missing(name: str, missing: list[str], compute: Callable[[], T]) -> T | None:
    try:
        return compute()
    except InsufficientSamplesError:
        missing.append(name)
        return None
