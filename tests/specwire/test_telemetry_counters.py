"""The telemetry counter set is defined once, in `specwire.WindowCounts`, with
its addition (`add_counts`). Everything else is derived from it; these tests fail when
a counter is added to the contract but not followed by one of the places that carry it:
the gateway's accumulator, control's totals, the stored row, the ingestion bounds."""

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from control.errors import InvalidRequest
from control.internal.limits import check_batch
from control.models import TelemetryWindowRow
from control.stats.windows import combine_windows
from control.telemetry.service import row_values, window_from_row
from gateway.telemetry.aggregator import TelemetryAggregator
from gateway.telemetry.record import RequestRecord
from specwire import (
    COUNTER_FIELDS,
    HISTOGRAM_FIELDS,
    LATENCY_BUCKETS_MS,
    MOMENT_FIELDS,
    POSITION_BUCKETS,
    SLICE_HISTOGRAM_FIELDS,
    Arm,
    LatencyHistogram,
    LoadSlice,
    LoadTotals,
    PositionTokens,
    RequestAcceptance,
    TelemetryBatch,
    TelemetryWindow,
    WindowCounts,
    add_counts,
)
from specwire.telemetry import UNKNOWN
from tests.gateway.records import make_record

START = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
N_BUCKETS = len(LATENCY_BUCKETS_MS) + 1


def _histogram(seed: int) -> LatencyHistogram:
    counts = [0] * N_BUCKETS
    counts[seed % N_BUCKETS] = seed
    return LatencyHistogram(
        counts=counts, sum_ms=10.0 * seed, sum_log=1.5 * seed, sum_sq_log=2.5 * seed
    )


def _moments(kind: type[LoadTotals] | type[RequestAcceptance], seed: int) -> dict[str, int]:
    return {name: seed + i for i, name in enumerate(kind.model_fields)}


# Totals the buckets must fit (specwire.window_checks): errors, client errors and
# cancellations among the requests, e2e_per_token samples among the completion tokens,
# the response-position buckets adding up to the drafted and accepted tokens.
_FITTING_TOTALS = {"requests": 100, "completion_tokens": 500, "drafted_tokens": 37}
_FITTING_TOTALS |= {"accepted_tokens": 23}
# Samples per histogram: tpot <= ttft <= e2e and e2e_per_token <= e2e, as from a gateway.
_HISTOGRAM_SEEDS = {"ttft": 22, "tpot": 21, "e2e": 23, "e2e_per_token": 20}


def _full_window() -> TelemetryWindow:
    """A window with every counter set, each to its own value (counted down: accepted
    tokens come after drafted ones in COUNTER_FIELDS and may not exceed them), its
    buckets fitting its totals, so ingestion accepts it."""
    counters = {name: 11 + len(COUNTER_FIELDS) - i for i, name in enumerate(COUNTER_FIELDS)}
    return TelemetryWindow(
        segment_id=3,
        arm=Arm.SPEC,
        pair_version_id=4,
        rollout_id=5,
        window_start=START,
        window_seconds=10,
        **(counters | _FITTING_TOTALS),
        accepted_per_position=[9, 6, 2],
        **{
            name: _histogram(_HISTOGRAM_SEEDS.get(name, 24 + i))
            for i, name in enumerate(HISTOGRAM_FIELDS)
        },
        by_load=[
            LoadSlice(
                load_bucket=2,
                requests=7,
                **{name: _histogram(4 + i) for i, name in enumerate(SLICE_HISTOGRAM_FIELDS)},
            )
        ],
        # NOTE: dispatched (the first moment) is the slices' 7 requests.
        load=LoadTotals(**_moments(LoadTotals, 7)),
        request_acceptance=RequestAcceptance(**_moments(RequestAcceptance, 3)),
        by_response_position={
            "0-15": PositionTokens(drafted_tokens=30, accepted_tokens=20),
            UNKNOWN: PositionTokens(drafted_tokens=7, accepted_tokens=3),
        },
    )


def test_every_field_of_the_counter_set_has_a_kind_and_an_addition() -> None:
    kinds = (
        *COUNTER_FIELDS,
        *HISTOGRAM_FIELDS,
        *MOMENT_FIELDS,
        "accepted_per_position",
        "by_load",
        "by_response_position",
    )
    assert sorted(kinds) == sorted(WindowCounts.model_fields)
    window = _full_window()
    total = add_counts([window, window])
    assert set(total) == set(WindowCounts.model_fields)
    for name in COUNTER_FIELDS:
        assert total[name] == 2 * getattr(window, name), name
    for name in HISTOGRAM_FIELDS:
        one, two = getattr(window, name), total[name]
        assert two.counts == [2 * c for c in one.counts], name
        assert (two.sum_ms, two.sum_log, two.sum_sq_log) == (
            2 * one.sum_ms,
            2 * one.sum_log,
            2 * one.sum_sq_log,
        ), name
    for name in MOMENT_FIELDS:
        assert total[name].model_dump() == {
            k: 2 * v for k, v in getattr(window, name).model_dump().items()
        }, name
    assert total["accepted_per_position"] == [18, 12, 4]
    [added] = total["by_load"]
    assert (added.load_bucket, added.requests) == (2, 14)
    for name in SLICE_HISTOGRAM_FIELDS:
        assert getattr(added, name).total == 2 * getattr(window.by_load[0], name).total
    positions = total["by_response_position"]
    assert {b: (t.drafted_tokens, t.accepted_tokens) for b, t in positions.items()} == {
        "0-15": (60, 40),
        UNKNOWN: (14, 6),
    }


def test_controls_totals_carry_every_counter() -> None:
    window = _full_window()
    totals = combine_windows([window])
    assert totals.windows == 1
    for name in WindowCounts.model_fields:
        assert getattr(totals, name) == getattr(window, name), name


def test_the_stored_row_keeps_every_counter() -> None:
    columns = set(TelemetryWindowRow.__table__.columns.keys())
    assert set(COUNTER_FIELDS) | {"accepted_per_position"} <= columns
    window = _full_window()
    row = TelemetryWindowRow(**row_values("gw-1", window, known_rollouts={5}))
    assert window_from_row(row) == window


def test_a_window_without_response_positions_is_accepted_and_reads_back_empty() -> None:
    """Older gateways send no `by_response_position`: the window is valid, the field empty,
    and a row stored before the column existed (NULL) reads back the same way."""
    sent = _full_window().model_dump(mode="json")
    del sent["by_response_position"]
    batch = TelemetryBatch.model_validate(
        {"gateway_id": "gw-old", "window_start": START.isoformat(), "windows": [sent]}
    )
    [window] = batch.windows
    assert window.by_response_position == {}
    check_batch(batch)
    row = TelemetryWindowRow(**row_values("gw-old", window, known_rollouts={5}))
    row.by_response_position = None
    assert window_from_row(row).by_response_position == {}
    assert window_from_row(row) == window


def test_a_response_position_bucket_outside_the_contract_is_refused() -> None:
    sent = _full_window().model_dump(mode="json")
    sent["by_response_position"] = {"1000+": {"drafted_tokens": 1, "accepted_tokens": 1}}
    with pytest.raises(ValidationError, match="1000"):
        TelemetryWindow.model_validate(sent)


def test_more_tokens_accepted_than_drafted_are_refused_in_totals_and_buckets() -> None:
    sent = _full_window().model_dump(mode="json")
    equal = {**sent, "accepted_tokens": sent["drafted_tokens"]}
    assert TelemetryWindow.model_validate(equal).accepted_tokens == sent["drafted_tokens"]
    with pytest.raises(ValidationError) as totals:
        TelemetryWindow.model_validate({**sent, "accepted_tokens": sent["drafted_tokens"] + 1})
    assert [(e["type"], e["loc"]) for e in totals.value.errors()] == [
        ("accepted_exceeds_drafted", ("accepted_tokens",))
    ]
    bucket = {"16-63": {"drafted_tokens": 4, "accepted_tokens": 5}}
    with pytest.raises(ValidationError) as buckets:
        TelemetryWindow.model_validate({**sent, "by_response_position": bucket})
    assert [(e["type"], e["loc"]) for e in buckets.value.errors()] == [
        ("accepted_exceeds_drafted", ("by_response_position", "16-63", "accepted_tokens"))
    ]


def test_the_ingestion_bounds_every_counter() -> None:
    for name in COUNTER_FIELDS:
        window = _full_window().model_copy(update={name: 2**31})
        batch = TelemetryBatch(gateway_id="gw-1", window_start=START, windows=[window])
        with pytest.raises(InvalidRequest) as refused:
            check_batch(batch)
        assert refused.value.details == {"param": f"windows.0.{name}"}


def _record(request_id: str, outcome: str) -> RequestRecord:
    return make_record(
        request_id=request_id,
        outcome=outcome,
        finished_at=START.timestamp() + 1,
        gateway_load=1,
        engine_running=2,
        engine_waiting=1,
    )


def test_the_gateway_fills_every_counter() -> None:
    record = _record("r1", "error")
    assert set(record.counts()) == set(COUNTER_FIELDS)
    assert set(record.latencies()) == set(HISTOGRAM_FIELDS)
    assert set(SLICE_HISTOGRAM_FIELDS) <= set(HISTOGRAM_FIELDS)
    aggregator = TelemetryAggregator("gw-1", 10, 4)
    aggregator.record(record)
    aggregator.record(_record("r2", "cancelled"))
    # A client error adds to its own counter and to nothing that describes the arm.
    aggregator.record(_record("r3", "client_error"))
    [batch] = aggregator.drain_all()
    [window] = batch.windows
    for name in COUNTER_FIELDS:
        assert getattr(window, name) > 0, name
    assert (window.requests, window.errors, window.client_errors) == (3, 1, 1)
    for name in HISTOGRAM_FIELDS:
        assert getattr(window, name).total == 2, name
    [load_slice] = window.by_load
    assert load_slice.requests == 2
    for name in SLICE_HISTOGRAM_FIELDS:
        assert getattr(load_slice, name).total == 2, name
    for name in MOMENT_FIELDS:
        assert all(v > 0 for v in getattr(window, name).model_dump().values()), name
    assert set(window.by_response_position) <= set(POSITION_BUCKETS)
    assert sum(t.drafted_tokens for t in window.by_response_position.values()) == (
        window.drafted_tokens
    )
