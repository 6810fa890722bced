"""The statistics that decide: pure numeric routines the automation jobs call.

No database, no Celery: inputs are counters and fixed-bucket histograms from
`specwire.telemetry`, outputs are frozen pydantic models carrying the
numbers a decision row stores as evidence (`.model_dump(mode="json")`).

- `windows`: add telemetry windows of one arm together.
- `acceptance`: per-position acceptance, pooled alpha, tokens per pass, speedup.
- `sprt`: Wald's sequential test of acceptable vs unacceptable acceptance.
- `depth`: the speculative length with the best expected speedup.
- `sequential`: CUSUM and confidence sequences, valid under repeated looks.
- `panel`: one arm's windows as arrays over time slots (load buckets, log moments).
- `load_model`: each arm's latency as a line over load; blocks compared at one load.
- `matched`: error-rate blocks and the spec pool's load projection.
- `acceptance_monitor`: the SPRT with the request as unit (design effect) and a CUSUM.
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
from control.stats.acceptance_monitor import AcceptanceMonitor, design_effect, monitor_acceptance
from control.stats.depth import DepthAdvice, DepthRow, advise_depth, cost_ratio_from_speedup
from control.stats.errors import InconsistentCountersError, InsufficientSamplesError, StatsError
from control.stats.matched import SpecFlow, error_blocks
from control.stats.panel import ArmPanel, build_panel
from control.stats.sequential import (
    BlockEstimate,
    ConfidenceSequence,
    CusumResult,
    RateExceedance,
    confidence_sequence,
    cusum_threshold,
    gaussian_cusum,
    mixture_radius,
    rate_exceedance,
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
from control.stats.windows import WindowTotals, add_histograms, combine_windows

__all__ = [
    "AcceptanceCounts",
    "AcceptanceEstimate",
    "AcceptanceMonitor",
    "AcceptanceSource",
    "ArmPanel",
    "BlockEstimate",
    "ConfidenceSequence",
    "CusumResult",
    "DepthAdvice",
    "DepthRow",
    "InconsistentCountersError",
    "InsufficientSamplesError",
    "RateExceedance",
    "SpecFlow",
    "SprtConfig",
    "SprtDecision",
    "SprtResult",
    "StatsError",
    "WindowTotals",
    "add_histograms",
    "advise_depth",
    "alpha_from_mean_accepted",
    "build_panel",
    "combine_windows",
    "confidence_sequence",
    "cost_ratio_from_speedup",
    "cusum_threshold",
    "design_effect",
    "error_blocks",
    "estimate_acceptance",
    "expected_speedup",
    "expected_speedup_iid",
    "expected_tokens_per_pass",
    "expected_tokens_per_pass_iid",
    "gaussian_cusum",
    "mixture_radius",
    "monitor_acceptance",
    "operating_characteristic",
    "rate_exceedance",
    "sprt_acceptance",
    "sprt_test",
    "wald_expected_trials",
    "wilson_interval",
]
