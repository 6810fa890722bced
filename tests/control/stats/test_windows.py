"""Adding telemetry windows: exact sums, and why rates are never averaged."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from control.stats import WindowTotals, add_histograms, combine_windows, estimate_acceptance
from specwire import Arm, LatencyHistogram, TelemetryWindow
from tests.control.stats.simulate import bucketize

START = datetime(2025, 3, 1, tzinfo=UTC)


def _window(i: int, **counters: object) -> TelemetryWindow:
    return TelemetryWindow(
        segment_id=7,
        arm=Arm.SPEC,
        window_start=START + timedelta(minutes=i),
        window_seconds=60,
        **counters,
    )


def test_sum_of_histograms_is_the_histogram_of_the_union() -> None:
    rng = np.random.default_rng(0)
    parts = [rng.lognormal(3.0, 1.5, size) for size in (10, 500, 2000)]
    histograms = [
        LatencyHistogram(counts=bucketize(p).tolist(), sum_ms=float(p.sum())) for p in parts
    ]
    total = add_histograms(histograms)
    union = np.concatenate(parts)
    assert total.counts == bucketize(union).tolist()
    assert total.total == union.size
    assert total.sum_ms == pytest.approx(union.sum())


def test_combine_windows_sums_counters_and_pads_positions() -> None:
    tpot = LatencyHistogram(counts=[0] * 20 + [4] + [0] * 41, sum_ms=20.0)
    windows = [
        _window(
            0,
            requests=10,
            errors=1,
            drafts=40,
            drafted_tokens=120,
            accepted_tokens=60,
            accepted_per_position=[30, 20, 10],
            tpot=tpot,
        ),
        _window(
            1,
            requests=5,
            cancellations=2,
            drafts=10,
            drafted_tokens=20,
            accepted_tokens=9,
            accepted_per_position=[6, 3],
        ),
    ]
    totals = combine_windows(windows)
    assert totals.windows == 2
    assert (totals.requests, totals.errors, totals.cancellations) == (15, 1, 2)
    assert (totals.drafts, totals.drafted_tokens, totals.accepted_tokens) == (50, 140, 69)
    assert totals.accepted_per_position == [36, 23, 10]
    assert totals.tpot.counts[20] == 4 and totals.tpot.total == 4
    # Running totals extend window by window and keep the window count.
    extended = combine_windows([totals, _window(2, requests=1)])
    assert extended.windows == 3 and extended.requests == 16
    assert combine_windows([]) == WindowTotals()


def test_acceptance_of_combined_windows_is_not_the_mean_of_window_rates() -> None:
    busy = _window(
        0, drafts=1000, drafted_tokens=2000, accepted_tokens=1300, accepted_per_position=[800, 500]
    )
    quiet = _window(
        1, drafts=10, drafted_tokens=20, accepted_tokens=2, accepted_per_position=[2, 0]
    )
    pooled = estimate_acceptance(combine_windows([busy, quiet]))
    assert pooled.conditional_rates[0] == pytest.approx(802 / 1010)
    mean_of_rates = (0.8 + 0.2) / 2
    assert abs((pooled.conditional_rates[0] or 0) - mean_of_rates) > 0.25
