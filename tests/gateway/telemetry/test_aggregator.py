"""Windowed aggregation: sums, buckets, window boundaries, late records, memory cap."""

import math
import threading
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.telemetry import RequestRecord, TelemetryAggregator, bucket_index
from gateway.telemetry.buckets import OVERFLOW_INDEX
from gateway.telemetry.positions import UNKNOWN, by_response_position
from specwire import LATENCY_BUCKETS_MS, LOAD_BUCKET_EDGES, Arm, TelemetryBatch, load_bucket
from tests.gateway.records import make_record

T0 = 1_700_000_000.0  # a multiple of 10 s: window [T0, T0 + 10)


def rec(**kw: object) -> RequestRecord:
    return make_record(**{"finished_at": T0 + 1.0, **kw})


def reference_bucket(value_ms: float) -> int:
    """The contract's rule, literally: first edge with value <= edge, else overflow."""
    for i, edge in enumerate(LATENCY_BUCKETS_MS):
        if value_ms <= edge:
            return i
    return len(LATENCY_BUCKETS_MS)


@given(st.floats(min_value=-1.0, max_value=1e6, allow_nan=False))
def test_bucket_index_matches_the_contract_rule(value: float) -> None:
    assert bucket_index(value) == reference_bucket(value)


def test_bucket_edges_are_inclusive_and_overflow_is_last() -> None:
    edge = LATENCY_BUCKETS_MS[20]  # 10 ms
    assert edge == 10.0
    assert bucket_index(edge) == 20
    assert bucket_index(edge + 1e-9) == 21
    assert bucket_index(0.0) == 0
    assert bucket_index(LATENCY_BUCKETS_MS[-1] + 1.0) == OVERFLOW_INDEX


def test_load_slices_and_request_acceptance_moments() -> None:
    agg = TelemetryAggregator("gw-1", window_seconds=10, max_pending_windows=8)
    # Two requests at load 0, one at load 5 (bucket [4, 6)), one never dispatched.
    agg.record(rec(gateway_load=0, engine_running=1, engine_waiting=0))
    agg.record(
        rec(
            gateway_load=0,
            engine_running=2,
            engine_waiting=1,
            drafts=4,
            accepted_tokens=5,
            accepted_per_position=(3, 2),
        )
    )
    agg.record(rec(gateway_load=5, engine_running=3, engine_waiting=2))
    agg.record(
        rec(
            outcome="error",
            http_status=503,
            completion_tokens=0,
            ttft_ms=None,
            drafts=0,
            drafted_tokens=0,
            accepted_tokens=0,
            accepted_per_position=(),
        )
    )
    [batch] = agg.drain_all()
    [w] = batch.windows
    assert [(s.load_bucket, s.requests) for s in w.by_load] == [(0, 2), (4, 1)]
    assert LOAD_BUCKET_EDGES[4:6] == (4, 6) and load_bucket(5) == 4
    # Each slice keeps its exact load sum: bucket 4 spans loads 4 and 5.
    assert [s.load_sum for s in w.by_load] == [0, 5]
    assert (w.load.dispatched, w.load.gateway_load_sum) == (3, 5)
    assert (w.load.engine_running_sum, w.load.engine_waiting_sum) == (6, 3)
    # Per request: judged t = drafts + accepted - accepted at the last position.
    # Defaults: 8 drafts, 12 accepted, (6, 4, 2) -> t = 18 (twice); the other: 4 + 5 - 2 = 7.
    acc = w.request_acceptance
    assert (acc.requests, acc.judged, acc.accepted) == (3, 18 + 18 + 7, 12 + 5 + 12)
    assert acc.accepted_sq == 12**2 * 2 + 5**2
    assert acc.accepted_judged == 12 * 18 * 2 + 5 * 7
    assert acc.judged_sq == 18**2 * 2 + 7**2
    # End-to-end time per token: 145 ms / 20 tokens, for the three requests with tokens.
    assert w.e2e_per_token.total == 3 and w.e2e_per_token.sum_ms == pytest.approx(3 * 7.25)
    assert w.e2e_per_token.sum_log == pytest.approx(3 * math.log(7.25))
    assert w.by_load[0].e2e_per_token.total == 2


def test_one_window_sums_every_field() -> None:
    agg = TelemetryAggregator("gw-1", window_seconds=10, max_pending_windows=8)
    agg.record(rec())
    agg.record(rec(accepted_per_position=(1, 1, 1, 1), drafts=1, drafted_tokens=4))
    agg.record(rec(outcome="error", http_status=502, completion_tokens=0, ttft_ms=None))
    agg.record(rec(outcome="cancelled", http_status=499, tpot_ms=None, e2e_ms=200_000.0))
    assert agg.drain_closed(T0 + 9.99) == []  # still open

    [batch] = agg.drain_closed(T0 + 10.0)
    assert batch.gateway_id == "gw-1"
    assert batch.window_start == datetime.fromtimestamp(T0, UTC)
    [w] = batch.windows
    assert (w.segment_id, w.arm, w.pair_version_id, w.rollout_id) == (1, Arm.SPEC, 7, 3)
    assert w.window_seconds == 10
    assert (w.requests, w.errors, w.cancellations) == (4, 1, 1)
    assert (w.prompt_tokens, w.completion_tokens) == (40, 60)
    assert (w.drafts, w.drafted_tokens, w.accepted_tokens) == (8 + 1 + 8 + 8, 24 + 4 + 48, 48)
    assert w.accepted_per_position == [6 + 1 + 6 + 6, 4 + 1 + 4 + 4, 2 + 1 + 2 + 2, 1]
    assert w.ttft.total == 3 and w.ttft.sum_ms == pytest.approx(150.0)
    assert w.ttft.counts[reference_bucket(50.0)] == 3
    assert w.tpot.total == 3 and w.tpot.counts[reference_bucket(5.0)] == 3
    assert w.e2e.total == 4
    assert w.e2e.counts[reference_bucket(145.0)] == 3
    assert w.e2e.counts[OVERFLOW_INDEX] == 1
    # Round-trips through the wire contract unchanged.
    assert TelemetryBatch.model_validate_json(batch.model_dump_json()) == batch
    assert agg.drain_closed(T0 + 100.0) == []


def test_keys_split_windows_and_window_starts_split_batches() -> None:
    agg = TelemetryAggregator("gw-1", window_seconds=10, max_pending_windows=8)
    agg.record(rec())
    agg.record(rec(arm=Arm.BASELINE, pair_version_id=None, drafts=0))
    agg.record(rec(segment_id=None, segment_name=None, rollout_id=None))
    agg.record(rec(finished_at=T0 + 10.0))  # first instant of the next window
    agg.record(rec(finished_at=T0 + 25.0))

    batches = agg.drain_closed(T0 + 20.0)
    assert [b.window_start.timestamp() for b in batches] == [T0, T0 + 10]
    first, second = batches
    keys = [(w.segment_id, w.arm, w.pair_version_id) for w in first.windows]
    assert keys == [(None, Arm.SPEC, 7), (1, Arm.BASELINE, None), (1, Arm.SPEC, 7)]
    assert [w.requests for w in second.windows] == [1]
    [third] = agg.drain_closed(T0 + 30.0)
    assert third.window_start.timestamp() == T0 + 20


def test_a_late_record_goes_to_the_next_window_not_a_second_batch() -> None:
    agg = TelemetryAggregator("gw-1", window_seconds=10, max_pending_windows=8)
    agg.record(rec())
    [batch] = agg.drain_closed(T0 + 10.5)
    assert batch.windows[0].requests == 1
    # Finished in the drained window but recorded after the drain: a second batch for
    # T0 would be discarded by control as a duplicate, so it must move forward.
    agg.record(rec(finished_at=T0 + 9.9))
    assert agg.late_records == 1
    [later] = agg.drain_closed(T0 + 20.0)
    assert later.window_start.timestamp() == T0 + 10
    assert later.windows[0].requests == 1


def test_a_restarted_gateway_never_re_emits_its_birth_window() -> None:
    before = TelemetryAggregator("gw-1", window_seconds=10, max_pending_windows=8)
    before.record(rec(finished_at=T0 + 2))
    [flushed_at_shutdown] = before.drain_all()
    after = TelemetryAggregator("gw-1", window_seconds=10, max_pending_windows=8, started_at=T0 + 5)
    after.record(rec(finished_at=T0 + 6))
    after.record(rec(finished_at=T0 + 11))
    [batch] = after.drain_all()
    assert flushed_at_shutdown.window_start.timestamp() == T0
    assert batch.window_start.timestamp() == T0 + 10  # not T0: control would drop it
    assert batch.windows[0].requests == 2


def test_memory_cap_drops_the_oldest_windows_and_counts_them() -> None:
    agg = TelemetryAggregator("gw-1", window_seconds=10, max_pending_windows=3)
    for i in range(5):
        agg.record(rec(finished_at=T0 + 10 * i + 1))
        agg.record(rec(finished_at=T0 + 10 * i + 2))
    assert agg.dropped_windows == 2
    assert agg.dropped_requests == 4
    starts = [b.window_start.timestamp() for b in agg.drain_all()]
    assert starts == [T0 + 20, T0 + 30, T0 + 40]


def test_concurrent_recording_loses_nothing() -> None:
    agg = TelemetryAggregator("gw-1", window_seconds=10, max_pending_windows=8)
    per_thread, threads = 2000, 8

    def work() -> None:
        for _ in range(per_thread):
            agg.record(rec())

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    [batch] = agg.drain_all()
    [w] = batch.windows
    assert w.requests == per_thread * threads
    assert w.completion_tokens == 20 * per_thread * threads
    assert w.e2e.total == per_thread * threads


def test_response_position_buckets_add_up_to_the_window_totals() -> None:
    """Per-step arrays land in their buckets; a request without them lands in UNKNOWN,
    so the buckets add up to the window's drafted and accepted tokens."""
    steps_accepted, steps_drafted = [1, 0, 0, 2, 2, 1, 0, 3, 2], [3] * 9
    detailed = rec(
        drafts=9,
        drafted_tokens=27,
        accepted_tokens=11,
        accepted_per_position=(6, 3, 2),
        by_response_position=by_response_position(steps_accepted, steps_drafted),
    )
    agg = TelemetryAggregator("gw-1", window_seconds=10, max_pending_windows=8)
    agg.record(detailed)
    agg.record(detailed)
    agg.record(rec())  # a summary engine: 24 drafted, 12 accepted, no per-step arrays
    agg.record(rec(arm=Arm.BASELINE, drafts=0, drafted_tokens=0, accepted_tokens=0, rollout_id=3))
    [batch] = agg.drain_all()
    spec, baseline = sorted(batch.windows, key=lambda w: w.arm.value != "spec")
    assert spec.arm == Arm.SPEC and baseline.arm == Arm.BASELINE
    # Verify steps begin at positions 1, 3, 4, 5, 8, 11, 13, 14 (bucket 0-15) and 18.
    buckets = spec.by_response_position
    assert {b: (t.drafted_tokens, t.accepted_tokens) for b, t in buckets.items()} == {
        "0-15": (2 * 24, 2 * 9),
        "16-63": (2 * 3, 2 * 2),
        UNKNOWN: (24, 12),
    }
    assert list(spec.by_response_position) == ["0-15", "16-63", UNKNOWN]  # bucket order
    assert sum(t.drafted_tokens for t in spec.by_response_position.values()) == (
        spec.drafted_tokens
    )
    assert sum(t.accepted_tokens for t in spec.by_response_position.values()) == (
        spec.accepted_tokens
    )
    assert (spec.drafted_tokens, spec.accepted_tokens) == (78, 34)
    # Nothing drafted: no bucket at all.
    assert baseline.by_response_position == {}
    assert TelemetryBatch.model_validate_json(batch.model_dump_json()) == batch
