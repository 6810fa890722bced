"""Adding telemetry windows together.

Every counter in a `TelemetryWindow` is a plain count over the window, and the
latency histograms use the fixed edges `LATENCY_BUCKETS_MS`, so windows from
any gateway replica and any time slice add bucket by bucket: the sum of the
histograms is exactly the histogram of the union of the samples. (Means,
rates and quantiles do not add; that is why the statistics always start from
these sums, never from per-window ratios.)

`accepted_per_position` may have different lengths across windows (pair
versions with different speculative lengths, or a window where no deep
position was reached); missing positions count as zero.
"""

from collections.abc import Iterable, Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from control.contract.telemetry import LATENCY_BUCKETS_MS, LatencyHistogram
from control.stats.acceptance import AcceptanceSource


class WindowCounters(AcceptanceSource, Protocol):
    """What the statistics read from a window; `TelemetryWindow` and `WindowTotals` both fit.
    The acceptance counters come from `AcceptanceSource`."""

    @property
    def requests(self) -> int: ...
    @property
    def errors(self) -> int: ...
    @property
    def cancellations(self) -> int: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def ttft(self) -> LatencyHistogram: ...
    @property
    def tpot(self) -> LatencyHistogram: ...
    @property
    def e2e(self) -> LatencyHistogram: ...


class WindowTotals(BaseModel):
    """Counters and histograms summed over `windows` telemetry windows of one arm."""

    model_config = ConfigDict(frozen=True)

    windows: int = Field(default=0, ge=0, description="How many windows were added.")
    requests: int = 0
    errors: int = 0
    cancellations: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    drafts: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_position: tuple[int, ...] = ()
    ttft: LatencyHistogram = Field(default_factory=LatencyHistogram)
    tpot: LatencyHistogram = Field(default_factory=LatencyHistogram)
    e2e: LatencyHistogram = Field(default_factory=LatencyHistogram)


def add_histograms(histograms: Iterable[LatencyHistogram]) -> LatencyHistogram:
    """Bucket-wise sum; exact because all histograms share `LATENCY_BUCKETS_MS`."""
    counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)
    sum_ms = 0.0
    for h in histograms:
        for i, c in enumerate(h.counts):
            counts[i] += c
        sum_ms += h.sum_ms
    return LatencyHistogram(counts=counts, sum_ms=sum_ms)


def add_per_position(rows: Iterable[Sequence[int]]) -> tuple[int, ...]:
    """Position-wise sum, padding shorter rows with zeros."""
    total: list[int] = []
    for row in rows:
        if len(row) > len(total):
            total.extend([0] * (len(row) - len(total)))
        for i, c in enumerate(row):
            total[i] += c
    return tuple(total)


def combine_windows(windows: Iterable[WindowCounters]) -> WindowTotals:
    """Sum several windows (or earlier totals) of the same arm into one `WindowTotals`.

    A `WindowTotals` passed back in contributes its own window count, so running
    totals can be extended window by window.
    """
    items = list(windows)
    return WindowTotals(
        windows=sum(w.windows if isinstance(w, WindowTotals) else 1 for w in items),
        requests=sum(w.requests for w in items),
        errors=sum(w.errors for w in items),
        cancellations=sum(w.cancellations for w in items),
        prompt_tokens=sum(w.prompt_tokens for w in items),
        completion_tokens=sum(w.completion_tokens for w in items),
        drafts=sum(w.drafts for w in items),
        drafted_tokens=sum(w.drafted_tokens for w in items),
        accepted_tokens=sum(w.accepted_tokens for w in items),
        accepted_per_position=add_per_position(w.accepted_per_position for w in items),
        ttft=add_histograms(w.ttft for w in items),
        tpot=add_histograms(w.tpot for w in items),
        e2e=add_histograms(w.e2e for w in items),
    )
