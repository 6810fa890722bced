"""Vectorized simulators shared by the statistics tests (seeded by the caller)."""

from types import SimpleNamespace

import numpy as np
from numpy.typing import NDArray

from control.stats import AcceptanceCounts
from control.telemetry.service import row_values
from specwire import TelemetryWindow
from specwire.telemetry import LATENCY_BUCKETS_MS

EDGES = np.asarray(LATENCY_BUCKETS_MS)
BUCKETS = len(LATENCY_BUCKETS_MS) + 1


def window_row(window: TelemetryWindow) -> SimpleNamespace:
    """The window as the telemetry table stores it (same columns, same JSON documents)."""
    known = {window.rollout_id} if window.rollout_id is not None else set()
    return SimpleNamespace(**row_values("test-gateway", window, known))


def bucketize(samples_ms: NDArray[np.float64]) -> NDArray[np.int64]:
    """Histogram counts with the contract's rule: bucket i holds edge[i-1] < x <= edge[i].

    samples_ms: [..., n] -> [..., buckets]
    """
    index = np.searchsorted(EDGES, samples_ms, side="left")  # [..., n]
    flat = index.reshape(-1, index.shape[-1])  # [rows, n]
    offsets = np.arange(flat.shape[0])[:, None] * BUCKETS
    counts = np.bincount((flat + offsets).ravel(), minlength=flat.shape[0] * BUCKETS)
    return counts.reshape(*index.shape[:-1], BUCKETS).astype(np.int64)


def accepted_prefix(
    rng: np.random.Generator, rates: NDArray[np.float64], drafts: int
) -> NDArray[np.bool_]:
    """[drafts, K]: position i accepted, i.e. draws at 0..i all succeeded (verification stops
    at the first rejection)."""
    draws = rng.random((drafts, rates.shape[0])) < rates  # [drafts, K]
    return np.cumprod(draws, axis=1).astype(bool)


def simulate_counts(
    rng: np.random.Generator, rates: list[float] | NDArray[np.float64], drafts: int
) -> AcceptanceCounts:
    """Counters a gateway would report for `drafts` drafts with per-position conditional rates."""
    r = np.asarray(rates, dtype=np.float64)
    accepted = accepted_prefix(rng, r, drafts)  # [drafts, K]
    per_position = tuple(int(v) for v in accepted.sum(axis=0))
    return AcceptanceCounts(
        drafts=drafts,
        drafted_tokens=drafts * r.shape[0],
        accepted_tokens=sum(per_position),
        accepted_per_position=per_position,
    )
