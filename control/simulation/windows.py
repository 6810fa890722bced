"""Simulated requests → the telemetry window a gateway would flush for them.

The same counters, histograms, load slices and per-request acceptance moments
as `gateway.telemetry.aggregator`, vectorized (a scenario run builds thousands
of windows); tests/bench/test_decisions.py checks that both agree on the same
requests. Failed requests count as requests and errors with their end-to-end
time only (no tokens, no TTFT), as the gateway records them.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from control.simulation.traffic import ArmRequests
from specwire import (
    LATENCY_BUCKETS_MS,
    LOAD_BUCKET_EDGES,
    Arm,
    LatencyHistogram,
    LoadSlice,
    LoadTotals,
    PositionTokens,
    RequestAcceptance,
    TelemetryWindow,
)
from specwire.telemetry import UNKNOWN

_EDGES = np.asarray(LATENCY_BUCKETS_MS, dtype=np.float64)
_LOAD_EDGES = np.asarray(LOAD_BUCKET_EDGES, dtype=np.int64)
PROMPT_TOKENS = 100


def histogram(values_ms: NDArray[np.float64]) -> LatencyHistogram:
    """Counts with the contract's "<= edge" rule, plus exact log moments."""
    index = np.searchsorted(_EDGES, values_ms, side="left")
    counts = np.bincount(index, minlength=len(_EDGES) + 1)
    logs = np.log(np.maximum(values_ms, 1e-3))
    return LatencyHistogram(
        counts=[int(c) for c in counts],
        sum_ms=float(values_ms.sum()),
        sum_log=float(logs.sum()),
        sum_sq_log=float((logs * logs).sum()),
    )


def window_of(
    requests: ArmRequests,
    *,
    arm: Arm,
    segment_id: int,
    pair_version_id: int,
    rollout_id: int | None,
    window_start: datetime,
    window_seconds: int,
) -> TelemetryWindow:
    ok = ~requests.errors  # [n]
    tokens = requests.tokens
    e2e_per_token = requests.e2e_ms / np.maximum(tokens, 1)
    multi = ok & (tokens > 1)
    per_position = requests.accepted_per_position[ok]  # [ok, k]
    drafts = requests.drafts[ok]
    accepted = per_position.sum(axis=1)  # [ok]
    drafted = drafts > 0
    judged = (drafts + accepted - per_position[:, -1]) if per_position.shape[1] else drafts
    a, t = accepted[drafted], judged[drafted]
    bucket = np.searchsorted(_LOAD_EDGES, requests.gateway_load, side="right") - 1
    slices = []
    for b in np.unique(bucket):
        inside = bucket == b
        slices.append(
            LoadSlice(
                load_bucket=int(b),
                requests=int(inside.sum()),
                load_sum=int(requests.gateway_load[inside].sum()),
                ttft=histogram(requests.ttft_ms[inside & ok]),
                tpot=histogram(requests.tpot_ms[inside & multi]),
                e2e_per_token=histogram(e2e_per_token[inside & ok]),
            )
        )
    is_spec = arm is Arm.SPEC
    k = per_position.shape[1]
    drafted_tokens = int(drafts.sum()) * k if is_spec else 0
    accepted_tokens = int(accepted.sum())
    # NOTE: simulated requests carry no per-step arrays, so, as the gateway counts such
    # requests, all their draft tokens fall in the unknown response-position bucket.
    positions = (
        {UNKNOWN: PositionTokens(drafted_tokens=drafted_tokens, accepted_tokens=accepted_tokens)}
        if drafted_tokens or accepted_tokens
        else {}
    )
    return TelemetryWindow(
        segment_id=segment_id,
        arm=arm,
        pair_version_id=pair_version_id,
        rollout_id=rollout_id,
        window_start=window_start,
        window_seconds=window_seconds,
        requests=requests.n,
        errors=int(requests.errors.sum()),
        prompt_tokens=PROMPT_TOKENS * requests.n,
        completion_tokens=int(tokens[ok].sum()),
        drafts=int(drafts.sum()),
        drafted_tokens=drafted_tokens,
        accepted_tokens=accepted_tokens,
        by_response_position=positions,
        accepted_per_position=[int(n) for n in per_position.sum(axis=0)] if is_spec else [],
        ttft=histogram(requests.ttft_ms[ok]),
        tpot=histogram(requests.tpot_ms[multi]),
        e2e=histogram(requests.e2e_ms),
        e2e_per_token=histogram(e2e_per_token[ok]),
        by_load=slices,
        load=LoadTotals(
            dispatched=requests.n,
            gateway_load_sum=int(requests.gateway_load.sum()),
            engine_running_sum=int(requests.engine_running.sum()),
            engine_waiting_sum=int(requests.engine_waiting.sum()),
        ),
        request_acceptance=RequestAcceptance(
            requests=int(drafted.sum()),
            judged=int(t.sum()),
            accepted=int(a.sum()),
            accepted_sq=int((a * a).sum()),
            accepted_judged=int((a * t).sum()),
            judged_sq=int((t * t).sum()),
        ),
    )
