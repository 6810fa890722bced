"""Latency SLO targets per segment and the histogram edges they must sit on.

The gateway exports TTFT and TPOT as Prometheus histograms with the buckets
below. A segment's SLO says "95 % of requests within T" for each of the two; the
burn-rate rules read the share of requests within T from the bucket whose upper
edge is T, so T must be one of these edges (control refuses any other value).
"""

import math

from specwire.telemetry import LATENCY_BUCKETS_MS

# Every second telemetry edge (5 per decade, 0.1 ms .. 100 s) in seconds: the
# Prometheus buckets then line up with the telemetry histograms control aggregates.
LATENCY_BUCKETS_S: tuple[float, ...] = tuple(round(e / 1000.0, 7) for e in LATENCY_BUCKETS_MS[::2])

# The SLO objective the burn-rate alerts use: 95 % of requests within the target.
SLO_OBJECTIVE = 0.95
# Targets of a segment that sets none, and of the gateway's catch-all segment labels.
DEFAULT_TTFT_SLO_S = 1.0
DEFAULT_TPOT_SLO_S = 0.1
# The gateway's segment label for requests no segment matched, and for segments
# beyond its top K: control exports the default targets under these two.
UNSEGMENTED_LABEL = "none"
OVERFLOW_LABEL = "other"


def slo_edge(seconds: float) -> float:
    """The bucket edge equal to `seconds` (to 1 ppm); ValueError naming the nearest
    edges when there is none."""
    for edge in LATENCY_BUCKETS_S:
        if math.isclose(edge, seconds, rel_tol=1e-6):
            return edge
    below = max((e for e in LATENCY_BUCKETS_S if e < seconds), default=None)
    above = min((e for e in LATENCY_BUCKETS_S if e > seconds), default=None)
    nearest = " or ".join(str(e) for e in (below, above) if e is not None)
    raise ValueError(
        f"{seconds} s is not an edge of the gateway's latency histogram buckets "
        f"(5 per decade); the nearest are {nearest}"
    )
