"""The statistics that decide: pure numeric routines the automation jobs call.

No database, no Celery: inputs are counters and fixed-bucket histograms from
`control.contract.telemetry`, outputs are frozen pydantic models carrying the
numbers a decision row stores as evidence (`.model_dump(mode="json")`).

- `windows`: add telemetry windows of one arm together.
- `acceptance`: per-position acceptance, pooled alpha, tokens per pass, speedup.
- `sprt`: Wald's sequential test of acceptable vs unacceptable acceptance.
- `latency`: Mann-Whitney U with ties on histograms, median-ratio speedup CI.
- `proportions`: one-sided error-rate comparison (z-test or Fisher exact).
- `depth`: the speculative length with the best expected speedup.
- `arms`: every statistic for one spec-vs-baseline comparison, as one evidence bundle.
"""

from control.stats.acceptance import (
    AcceptanceCounts,
    AcceptanceEstimate,
    AcceptanceSource,
    alpha_from_mean_accepted,
    estimate_acceptance,
    expected_speedup,
    expected_speedup_iid,
    expected_tokens_per_pass,
    expected_tokens_per_pass_iid,
    wilson_interval,
)
from control.stats.arms import ArmComparison, compare_arms
from control.stats.depth import DepthAdvice, DepthRow, advise_depth, cost_ratio_from_speedup
from control.stats.errors import InconsistentCountersError, InsufficientSamplesError, StatsError
from control.stats.latency import (
    LatencyComparison,
    MannWhitneyResult,
    SpeedupEstimate,
    compare_latency,
    mann_whitney_counts,
    median_speedup,
    quantile_from_counts,
)
from control.stats.proportions import (
    ProportionComparison,
    compare_error_rates,
    fisher_greater,
    two_proportion_z,
)
from control.stats.sprt import (
    SprtConfig,
    SprtDecision,
    SprtResult,
    operating_characteristic,
    sprt_acceptance,
    sprt_test,
    wald_expected_trials,
)
from control.stats.windows import WindowCounters, WindowTotals, add_histograms, combine_windows

__all__ = [
    "AcceptanceCounts",
    "AcceptanceEstimate",
    "AcceptanceSource",
    "ArmComparison",
    "DepthAdvice",
    "DepthRow",
    "InconsistentCountersError",
    "InsufficientSamplesError",
    "LatencyComparison",
    "MannWhitneyResult",
    "ProportionComparison",
    "SpeedupEstimate",
    "SprtConfig",
    "SprtDecision",
    "SprtResult",
    "StatsError",
    "WindowCounters",
    "WindowTotals",
    "add_histograms",
    "advise_depth",
    "alpha_from_mean_accepted",
    "combine_windows",
    "compare_arms",
    "compare_error_rates",
    "compare_latency",
    "cost_ratio_from_speedup",
    "estimate_acceptance",
    "expected_speedup",
    "expected_speedup_iid",
    "expected_tokens_per_pass",
    "expected_tokens_per_pass_iid",
    "fisher_greater",
    "mann_whitney_counts",
    "median_speedup",
    "operating_characteristic",
    "quantile_from_counts",
    "sprt_acceptance",
    "sprt_test",
    "two_proportion_z",
    "wald_expected_trials",
    "wilson_interval",
]
