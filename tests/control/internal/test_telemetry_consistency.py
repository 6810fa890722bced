"""POST /internal/v1/telemetry refuses a window whose parts do not fit its totals (422
`inconsistent_counts` naming the field, nothing stored), and takes what real gateways
and the simulation send."""

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from control.simulation.traffic import ArmModel, TrafficModel, sample_arm
from control.simulation.windows import window_of
from gateway.telemetry.aggregator import TelemetryAggregator
from gateway.telemetry.record import RequestFacts
from specwire import Arm, SamplingSummary, TelemetryBatch
from specwire.window_checks import window_mismatch
from tests.control.requests.records import stored_rows
from tests.gateway.records import NO_SPEC_WORK, make_record

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

Body = dict[str, Any]


def gateway_batch() -> TelemetryBatch:
    """One window start of the real aggregator, every kind of request in it: ok (with
    and without per-step positions), an arm error before the first token, a client
    error, a cancellation, one that reached no worker, one-token and busy-worker ones,
    and a baseline request."""
    agg = TelemetryAggregator("gw-real", window_seconds=10, max_pending_windows=4)
    t = T0.timestamp() + 1
    facts = RequestFacts(
        tenant_id=4,
        endpoint="chat",
        stream=True,
        model="tiny",
        adapter=None,
        sampling=SamplingSummary(),
        received_at=t - 1,
    )
    common: dict[str, Any] = {"finished_at": t, "facts": facts}
    spec = common | {"gateway_load": 1}
    no_first_token: dict[str, Any] = {"ttft_ms": None, "tpot_ms": None, "completion_tokens": 0}
    for rec in (
        make_record(request_id="ok", **spec),
        make_record(
            request_id="detailed", by_response_position=((20, 10), (4, 2), (0, 0), (0, 0)), **spec
        ),
        make_record(request_id="err", outcome="error", http_status=502, **no_first_token, **spec),
        make_record(request_id="4xx", outcome="client_error", http_status=400, **spec),
        make_record(request_id="gone", outcome="cancelled", http_status=499, **spec),
        make_record(
            request_id="no-worker", outcome="error", http_status=503, **no_first_token, **common
        ),
        make_record(request_id="one", completion_tokens=1, tpot_ms=None, **spec),
        make_record(request_id="busy", gateway_load=300, **common),
        make_record(request_id="base", arm=Arm.BASELINE, **NO_SPEC_WORK, **common),
    ):
        agg.record(rec)
    [batch] = agg.drain_all()
    return batch


def test_the_real_gateways_windows_are_stored(
    app_client: TestClient, session: Session, internal_headers: dict[str, str]
) -> None:
    batch = gateway_batch()
    [baseline, spec] = batch.windows
    assert (baseline.arm, baseline.requests, baseline.drafted_tokens) == (Arm.BASELINE, 1, 0)
    assert (spec.requests, spec.errors, spec.client_errors, spec.cancellations) == (8, 2, 1, 1)
    # Latency samples and load slices legitimately cover fewer requests than the window.
    assert (spec.e2e.total, spec.ttft.total, spec.tpot.total, spec.load.dispatched) == (7, 5, 4, 6)
    assert {s.load_bucket: s.requests for s in spec.by_load} == {1: 5, 14: 1}
    resp = app_client.post(
        "/internal/v1/telemetry",
        content=batch.model_dump_json(),
        headers=internal_headers | {"content-type": "application/json"},
    )
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"stored": 2, "duplicates": 0, "requests_stored": 9}
    assert stored_rows(session) == (1, 2, 9)


def _more(histogram: Body, n: int) -> Body:
    counts = list(histogram["counts"])
    counts[5] += n
    return {**histogram, "counts": counts}


def _slice(w: Body, **changes: Any) -> list[Body]:
    return [{**w["by_load"][0], **changes}, *w["by_load"][1:]]


# (the field named, how a fitting spec window is changed to break it)
WINDOW_CASES: list[tuple[str, Callable[[Body], Body]]] = [
    ("errors", lambda w: {**w, "cancellations": w["requests"]}),
    ("accepted_per_position.0", lambda w: {**w, "accepted_per_position": [w["drafts"] + 1]}),
    ("ttft", lambda w: {**w, "ttft": _more(w["ttft"], 3)}),  # 8 of 7 requests with latencies
    ("e2e", lambda w: {**w, "e2e": _more(w["e2e"], 1)}),  # 8 e2e samples, 1 client error
    ("tpot", lambda w: {**w, "tpot": _more(w["tpot"], 2)}),  # more than ttft's 5
    ("e2e_per_token", lambda w: {**w, "completion_tokens": 3}),
    ("by_load.0.ttft", lambda w: {**w, "by_load": _slice(w, ttft=_more(w["ttft"], 1))}),
    ("by_load.0.load_sum", lambda w: {**w, "by_load": _slice(w, load_sum=0)}),
    ("by_load", lambda w: {**w, "load": {**w["load"], "dispatched": 5}}),
    (
        "load.dispatched",
        lambda w: {
            **w,
            "by_load": _slice(w, requests=7, load_sum=None),
            "load": {**w["load"], "dispatched": 8},
        },
    ),
    (
        "request_acceptance.accepted",
        lambda w: {**w, "request_acceptance": {**w["request_acceptance"], "accepted": 1000}},
    ),
    (
        "by_response_position",
        lambda w: {**w, "by_response_position": {"0-15": {"drafted_tokens": 1}}},
    ),
]


@pytest.mark.parametrize(("field", "change"), WINDOW_CASES, ids=[c[0] for c in WINDOW_CASES])
def test_a_window_whose_parts_do_not_fit_its_totals_is_422_naming_the_field(
    app_client: TestClient,
    session: Session,
    internal_headers: dict[str, str],
    field: str,
    change: Callable[[Body], Body],
) -> None:
    body = gateway_batch().model_dump(mode="json")
    body["windows"][1] = change(body["windows"][1])
    resp = app_client.post(
        "/internal/v1/telemetry",
        content=json.dumps(body),
        headers=internal_headers | {"content-type": "application/json"},
    )
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert (error["code"], error["param"]) == ("inconsistent_counts", f"windows.1.{field}")
    assert error["message"].startswith(f"windows.1.{field}: ")
    assert stored_rows(session) == (0, 0, 0)


@pytest.mark.parametrize("load", [0.0, 5.0, 200.0])
def test_the_simulated_windows_fit_their_totals(load: float) -> None:
    """The bench and the automation tests post simulated windows over HTTP too."""
    rng = np.random.default_rng(7)
    for arm, model in (
        (Arm.SPEC, ArmModel(tpot_ms=20.0, load_slope=0.1, error_rate=0.2, acceptance=0.7)),
        (Arm.BASELINE, ArmModel(tpot_ms=25.0, load_slope=0.1, error_rate=0.2)),
    ):
        window = window_of(
            sample_arm(rng, model, TrafficModel(k=3), 300, load),
            arm=arm,
            segment_id=1,
            pair_version_id=2,
            rollout_id=None,
            window_start=T0,
            window_seconds=10,
        )
        assert window.errors > 0 and window.by_load, arm
        assert window_mismatch(window) is None, arm
