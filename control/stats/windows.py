"""Adding telemetry windows together.

The counters and their addition are the contract's (`WindowCounts`,
`add_counts`): every counter is a plain count over the window, and the latency
histograms use the fixed edges `LATENCY_BUCKETS_MS`, so windows from any
gateway replica and any time slice add bucket by bucket: the sum of the
histograms is exactly the histogram of the union of the samples. (Means, rates
and quantiles do not add; that is why the statistics always start from these
sums, never from per-window ratios.)
"""

from collections.abc import Iterable

from pydantic import ConfigDict, Field

from specwire.telemetry import WindowCounts, add_counts, add_histograms

__all__ = ["WindowTotals", "add_histograms", "combine_windows"]


class WindowTotals(WindowCounts):
    """Every counter summed over `windows` telemetry windows of one arm."""

    model_config = ConfigDict(frozen=True)

    windows: int = Field(default=0, ge=0, description="How many windows were added.")


def combine_windows(windows: Iterable[WindowCounts]) -> WindowTotals:
    """Sum several windows (or earlier totals) of the same arm into one `WindowTotals`.

    A `WindowTotals` passed back in contributes its own window count, so running
    totals can be extended window by window.
    """
    items = list(windows)
    return WindowTotals(
        windows=sum(w.windows if isinstance(w, WindowTotals) else 1 for w in items),
        **add_counts(items),
    )
