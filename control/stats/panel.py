"""One arm's telemetry as arrays over time slots, read straight from window documents.

A *time slot* is one window start; several gateway replicas may each have sent a
window for it, and they add (counts, histograms and moments are all sums). The
panel keeps what the sequential monitors consume, per slot:

- request and error counts, and the load the requests met at dispatch;
- per load bucket and latency metric the log moments (n, sum ln ms, sum ln^2 ms)
  and the histogram counts;
- the per-request acceptance moments and the classic acceptance counters.

It is built from plain documents (the ORM row's columns, or anything with the
same attributes), not from pydantic models: the automation reads hundreds of
windows per tick and validation would dominate.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from control.stats.acceptance import AcceptanceCounts, AcceptanceSource
from specwire.telemetry import LATENCY_BUCKETS_MS, LOAD_BUCKET_EDGES

METRICS: tuple[str, ...] = ("e2e_per_token", "ttft", "tpot")
N_LOAD = len(LOAD_BUCKET_EDGES)
# A window from a gateway that did not split its latencies by load: its arm-wide
# histograms form one more stratum, matched only with the other arm's like it.
UNKNOWN_LOAD = N_LOAD
N_STRATA = N_LOAD + 1
N_BUCKETS = len(LATENCY_BUCKETS_MS) + 1
N_METRICS = len(METRICS)
# ln of each latency bucket's log-midpoint: the moments of a histogram sent without
# exact log sums (edges 10^(k/10): the midpoint of (e_{i-1}, e_i] is e_i 10^-0.05).
_EDGES = np.asarray(LATENCY_BUCKETS_MS, dtype=np.float64)
LOG_MIDPOINTS = _LOG_MID = np.log(np.append(_EDGES, _EDGES[-1] * 10**0.1) * 10**-0.05)  # [buckets]
# Acceptance moment fields, in the order the panel stores them.
ACCEPTANCE_FIELDS = (
    "requests",
    "judged",
    "accepted",
    "accepted_sq",
    "accepted_judged",
    "judged_sq",
)
LOAD_FIELDS = ("dispatched", "gateway_load_sum", "engine_running_sum", "engine_waiting_sum")
# A load bucket's representative load where a slice did not record its load sum: the
# mean of the integer loads in [edge_i, edge_i+1) (the open last bucket: 1.25 x its edge).
BUCKET_MIDPOINTS: tuple[float, ...] = (
    *((lo + hi - 1) / 2 for lo, hi in itertools.pairwise(LOAD_BUCKET_EDGES)),
    LOAD_BUCKET_EDGES[-1] * 1.25,
)


class WindowDocument(AcceptanceSource, Protocol):
    """What the panel reads of a stored telemetry window (TelemetryWindowRow fits); the
    acceptance counters come from `AcceptanceSource`."""

    @property
    def window_start(self) -> Any: ...
    @property
    def window_seconds(self) -> int: ...
    @property
    def requests(self) -> int: ...
    @property
    def errors(self) -> int: ...
    @property
    def client_errors(self) -> int: ...
    @property
    def histograms(self) -> Mapping[str, Any]: ...
    @property
    def moments(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class ArmPanel:
    """One arm over T time slots."""

    requests: NDArray[np.int64]  # [T]
    errors: NDArray[np.int64]  # [T]
    drafts: NDArray[np.int64]  # [T]
    drafted_tokens: NDArray[np.int64]  # [T]
    accepted_tokens: NDArray[np.int64]  # [T]
    accepted_per_position: NDArray[np.int64]  # [T, K]
    e2e_ms: NDArray[np.float64]  # [T, 2]: samples, sum of ms
    load: NDArray[np.int64]  # [T, len(LOAD_FIELDS)]
    acceptance: NDArray[np.int64]  # [T, len(ACCEPTANCE_FIELDS)]
    moments: NDArray[np.float64]  # [T, N_STRATA, N_METRICS, 3]: n, sum ln, sum ln^2
    counts: NDArray[np.int32]  # [T, N_STRATA, N_METRICS, N_BUCKETS]
    # Per load stratum: dispatched requests and the sum of their loads at dispatch.
    strata_load: NDArray[np.float64]  # [T, N_STRATA, 2]

    def __post_init__(self) -> None:
        t = self.requests.shape
        assert len(t) == 1, t
        for name in ("errors", "drafts", "drafted_tokens", "accepted_tokens"):
            assert getattr(self, name).shape == t, (name, getattr(self, name).shape, t)
        assert self.accepted_per_position.ndim == 2, self.accepted_per_position.shape
        assert self.e2e_ms.shape == (*t, 2), self.e2e_ms.shape
        assert self.load.shape == (*t, len(LOAD_FIELDS)), self.load.shape
        assert self.acceptance.shape == (*t, len(ACCEPTANCE_FIELDS)), self.acceptance.shape
        assert self.moments.shape == (*t, N_STRATA, N_METRICS, 3), self.moments.shape
        assert self.counts.shape == (*t, N_STRATA, N_METRICS, N_BUCKETS), self.counts.shape
        assert self.strata_load.shape == (*t, N_STRATA, 2), self.strata_load.shape
        assert self.accepted_per_position.shape[0] == t[0], self.accepted_per_position.shape

    @property
    def slots(self) -> int:
        return int(self.requests.shape[0])

    def acceptance_counts(self, first: int = 0, last: int | None = None) -> AcceptanceCounts:
        """The classic acceptance counters summed over slots [first, last)."""
        s = slice(first, last)
        per_position = self.accepted_per_position[s].sum(axis=0)
        # NOTE: trailing zero positions are kept: they are the speculative length.
        return AcceptanceCounts(
            drafts=int(self.drafts[s].sum()),
            drafted_tokens=int(self.drafted_tokens[s].sum()),
            accepted_tokens=int(self.accepted_tokens[s].sum()),
            accepted_per_position=tuple(int(n) for n in per_position),
        )

    def mean_load(self, first: int = 0, last: int | None = None) -> float | None:
        """Mean of max(gateway in-flight, engine running + waiting) at dispatch."""
        load = self.load[first:last].sum(axis=0)
        dispatched = int(load[0])
        if dispatched == 0:
            return None
        gateway = load[1] / dispatched
        engine = (load[2] + load[3]) / dispatched
        return float(max(gateway, engine))


@dataclass(frozen=True)
class WindowArrays:
    """One stored window's contribution to a panel, parsed once (windows never change)."""

    window_start: Any
    window_seconds: int
    # [requests served (client errors left out), errors, drafts, drafted_tokens, accepted_tokens]
    counters: NDArray[np.int64]
    accepted_per_position: NDArray[np.int64]  # [K]
    e2e_ms: NDArray[np.float64]  # [samples, sum of ms]
    load: NDArray[np.int64]  # [len(LOAD_FIELDS)]
    acceptance: NDArray[np.int64]  # [len(ACCEPTANCE_FIELDS)]
    load_buckets: NDArray[np.int64]  # [S] occupied load buckets
    moments: NDArray[np.float64]  # [S, N_METRICS, 3]
    counts: NDArray[np.int32]  # [S, N_METRICS, N_BUCKETS]
    slice_load: NDArray[np.float64]  # [S, 2]: requests, sum of their loads at dispatch


def window_arrays(w: WindowDocument) -> WindowArrays:
    histograms = w.histograms or {}
    moments_doc = w.moments or {}
    e2e = histograms.get("e2e") or {}
    load = moments_doc.get("load") or {}
    slices = list(histograms.get("by_load") or ())
    buckets = [int(sl["load_bucket"]) for sl in slices]
    if not slices and _has_latency(histograms):
        slices = [_unsplit_slice(histograms)]
        buckets = [UNKNOWN_LOAD]
    moments = np.zeros((len(slices), N_METRICS, 3), np.float64)
    counts = np.zeros((len(slices), N_METRICS, N_BUCKETS), np.int32)
    slice_load = np.zeros((len(slices), 2), np.float64)
    for i, load_slice in enumerate(slices):
        slice_load[i] = _slice_load(load_slice, buckets[i])
        for m, metric in enumerate(METRICS):
            histogram = load_slice.get(metric)
            if histogram:
                _read_histogram(histogram, moments[i, m], counts[i, m])
    return WindowArrays(
        window_start=w.window_start,
        window_seconds=w.window_seconds,
        # NOTE: a client error (a 4xx: the request's own fault) is not a request the arm
        # served: in neither the errors nor their denominator.
        counters=np.asarray(
            [
                w.requests - (w.client_errors or 0),
                w.errors,
                w.drafts,
                w.drafted_tokens,
                w.accepted_tokens,
            ],
            np.int64,
        ),
        accepted_per_position=np.asarray(list(w.accepted_per_position or ()), np.int64),
        e2e_ms=np.asarray(
            [sum(e2e.get("counts") or ()), float(e2e.get("sum_ms") or 0.0)], np.float64
        ),
        load=np.asarray([int(load.get(f, 0)) for f in LOAD_FIELDS], np.int64),
        acceptance=_acceptance_moments(w, moments_doc.get("request_acceptance") or {}),
        load_buckets=np.asarray(buckets, dtype=np.int64),
        moments=moments,
        counts=counts,
        slice_load=slice_load,
    )


def _slice_load(load_slice: Mapping[str, Any], bucket: int) -> tuple[float, float]:
    """(requests, sum of loads) of one slice; the bucket's midpoint stands in for a load sum
    the gateway did not record. A slice of unknown load has none (0, 0)."""
    if bucket == UNKNOWN_LOAD:
        return 0.0, 0.0
    requests = float(load_slice.get("requests") or 0)
    recorded = load_slice.get("load_sum")
    if recorded is None:
        return requests, requests * BUCKET_MIDPOINTS[bucket]
    return requests, float(recorded)


def _has_latency(histograms: Mapping[str, Any]) -> bool:
    return any(sum((histograms.get(m) or {}).get("counts") or ()) for m in ("tpot", "ttft"))


def _unsplit_slice(histograms: Mapping[str, Any]) -> dict[str, Any]:
    """The arm-wide histograms as one slice of unknown load. NOTE: without end-to-end
    time per token (an older gateway) the monitors judge TPOT in its place."""
    per_token = histograms.get("e2e_per_token") or {}
    if not sum(per_token.get("counts") or ()):
        per_token = histograms.get("tpot") or {}
    return {
        "e2e_per_token": per_token,
        "ttft": histograms.get("ttft"),
        "tpot": histograms.get("tpot"),
    }


def _acceptance_moments(w: WindowDocument, doc: Mapping[str, Any]) -> NDArray[np.int64]:
    """Per-request acceptance moments; for a gateway that sent none, the most cautious
    ones its counters allow: every request all-or-nothing, so the design effect is the
    judged positions per request (each request weighs as one trial)."""
    moments = np.asarray([int(doc.get(f, 0)) for f in ACCEPTANCE_FIELDS], np.int64)
    per_position = list(w.accepted_per_position or ())
    if moments[0] > 0 or w.drafts <= 0 or not per_position:
        return moments
    requests = max(w.requests - w.errors, 1)
    judged = w.drafts + w.accepted_tokens - per_position[-1]
    mean_judged = judged / requests
    accepted = w.accepted_tokens
    return np.asarray(
        [
            requests,
            judged,
            accepted,
            round(accepted * mean_judged),
            round(accepted * mean_judged),
            round(judged * mean_judged),
        ],
        np.int64,
    )


def _read_histogram(
    doc: Mapping[str, Any], moments: NDArray[np.float64], counts: NDArray[np.int32]
) -> None:
    """Fill one metric's moments [3] and counts [N_BUCKETS] from a histogram document."""
    raw = np.asarray(doc["counts"], dtype=np.int64)  # [N_BUCKETS]
    n = float(raw.sum())
    if n == 0:
        return
    counts[:] = raw
    sum_log, sum_sq = doc.get("sum_log"), doc.get("sum_sq_log")
    if sum_log is None or sum_sq is None:
        # NOTE: a gateway that did not send exact log sums: bucket midpoints, which
        # add the bucket's width (ln 10^0.1) as uniform quantization noise.
        sum_log = float(raw @ _LOG_MID)
        sum_sq = float(raw @ (_LOG_MID**2)) + n * (math.log(10) / 10) ** 2 / 12
    moments[:] = (n, float(sum_log), float(sum_sq))


def empty_panel(slots: int, positions: int = 0) -> ArmPanel:
    return ArmPanel(
        requests=np.zeros(slots, np.int64),
        errors=np.zeros(slots, np.int64),
        drafts=np.zeros(slots, np.int64),
        drafted_tokens=np.zeros(slots, np.int64),
        accepted_tokens=np.zeros(slots, np.int64),
        accepted_per_position=np.zeros((slots, positions), np.int64),
        e2e_ms=np.zeros((slots, 2), np.float64),
        load=np.zeros((slots, len(LOAD_FIELDS)), np.int64),
        acceptance=np.zeros((slots, len(ACCEPTANCE_FIELDS)), np.int64),
        moments=np.zeros((slots, N_STRATA, N_METRICS, 3), np.float64),
        counts=np.zeros((slots, N_STRATA, N_METRICS, N_BUCKETS), np.int32),
        strata_load=np.zeros((slots, N_STRATA, 2), np.float64),
    )


def build_panel(
    slot_of: Mapping[Any, int], slots: int, windows: Iterable[WindowArrays]
) -> ArmPanel:
    """Sum `windows` into a panel; `slot_of` maps a window start to its slot index."""
    arrays = list(windows)
    positions = max((len(w.accepted_per_position) for w in arrays), default=0)
    panel = empty_panel(slots, positions)
    for w in arrays:
        t = slot_of[w.window_start]
        requests, errors, drafts, drafted, accepted = w.counters
        panel.requests[t] += requests
        panel.errors[t] += errors
        panel.drafts[t] += drafts
        panel.drafted_tokens[t] += drafted
        panel.accepted_tokens[t] += accepted
        if len(w.accepted_per_position):
            panel.accepted_per_position[t, : len(w.accepted_per_position)] += (
                w.accepted_per_position
            )
        panel.e2e_ms[t] += w.e2e_ms
        panel.load[t] += w.load
        panel.acceptance[t] += w.acceptance
        if len(w.load_buckets):
            panel.moments[t, w.load_buckets] += w.moments
            panel.counts[t, w.load_buckets] += w.counts
            panel.strata_load[t, w.load_buckets] += w.slice_load
    return panel
