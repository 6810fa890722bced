"""POST /internal/v1/telemetry idempotency, and the automation's window reads."""

import json
import threading
import time
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.db import Database
from control.models import TelemetryBatchRow, TelemetryWindowRow
from control.telemetry.service import ingest_batch, list_windows, window_totals
from specwire import (
    LATENCY_BUCKETS_MS,
    Arm,
    LatencyHistogram,
    PositionTokens,
    TelemetryAck,
    TelemetryBatch,
    TelemetryWindow,
)
from tests.control.internal.factories import build_world

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def histogram(**bucket_counts: int) -> LatencyHistogram:
    """`b<i>=n`: n samples in bucket i."""
    counts = [0] * (len(LATENCY_BUCKETS_MS) + 1)
    total_ms = 0.0
    for key, n in bucket_counts.items():
        i = int(key[1:])
        counts[i] = n
        total_ms += n * LATENCY_BUCKETS_MS[min(i, len(LATENCY_BUCKETS_MS) - 1)]
    return LatencyHistogram(counts=counts, sum_ms=total_ms)


def window(
    segment_id: int | None,
    arm: Arm,
    start: datetime,
    *,
    rollout_id: int | None = None,
    pair_version_id: int | None = None,
    requests: int = 10,
    accepted: int = 20,
    per_position: list[int] | None = None,
    ttft: LatencyHistogram | None = None,
) -> TelemetryWindow:
    return TelemetryWindow(
        segment_id=segment_id,
        arm=arm,
        pair_version_id=pair_version_id,
        rollout_id=rollout_id,
        window_start=start,
        window_seconds=10,
        requests=requests,
        errors=1,
        prompt_tokens=100,
        completion_tokens=200,
        drafts=15,
        drafted_tokens=45,
        accepted_tokens=accepted,
        accepted_per_position=per_position or [10, 6, 4],
        ttft=ttft or histogram(b20=requests),
        e2e=histogram(b30=requests),  # every request has an e2e sample, as from a gateway
    )


def test_batch_is_stored_once_and_a_replay_is_a_no_op(
    app_client: TestClient, session: Session, internal_headers: dict[str, str]
) -> None:
    world = build_world(session)
    session.commit()
    pv, seg = world.pair_version.id, world.segment.id
    batch = TelemetryBatch(
        gateway_id="gw-a",
        window_start=T0,
        windows=[
            window(seg, Arm.SPEC, T0, rollout_id=world.rollout.id, pair_version_id=pv),
            window(seg, Arm.BASELINE, T0, rollout_id=world.rollout.id),
            window(None, Arm.BASELINE, T0),
        ],
    )
    body = batch.model_dump_json()
    headers = internal_headers | {"content-type": "application/json"}

    first = app_client.post("/internal/v1/telemetry", content=body, headers=headers)
    replay = app_client.post("/internal/v1/telemetry", content=body, headers=headers)

    assert (first.status_code, first.json()) == (
        200,
        {"stored": 3, "duplicates": 0, "requests_stored": 0},
    )
    assert (replay.status_code, replay.json()) == (
        200,
        {"stored": 0, "duplicates": 3, "requests_stored": 0},
    )
    rows = session.scalars(select(TelemetryWindowRow).order_by(TelemetryWindowRow.id)).all()
    assert [(r.source, r.segment_id, r.arm, r.pair_version_id) for r in rows] == [
        ("gw-a", seg, "spec", pv),
        ("gw-a", seg, "baseline", 0),
        ("gw-a", 0, "baseline", 0),
    ]
    assert rows[0].window_start == T0
    assert rows[0].rollout_id == world.rollout.id
    assert rows[0].histograms["ttft"]["counts"][20] == 10
    assert session.scalar(select(func.count()).select_from(TelemetryBatchRow)) == 1


def test_windows_with_and_without_response_positions_are_both_stored(
    app_client: TestClient, session: Session, internal_headers: dict[str, str]
) -> None:
    """An older gateway sends no `by_response_position`: its batch is stored and the
    window reads back with none; a newer one's buckets are kept as sent."""
    world = build_world(session)
    session.commit()
    seg, pv = world.segment.id, world.pair_version.id
    headers = internal_headers | {"content-type": "application/json"}
    old = TelemetryBatch(
        gateway_id="gw-old", window_start=T0, windows=[window(seg, Arm.SPEC, T0)]
    ).model_dump(mode="json")
    for sent in old["windows"]:
        del sent["by_response_position"]
    new = TelemetryBatch(
        gateway_id="gw-new",
        window_start=T0,
        windows=[
            window(seg, Arm.SPEC, T0, pair_version_id=pv).model_copy(
                update={
                    "by_response_position": {
                        "0-15": PositionTokens(drafted_tokens=30, accepted_tokens=15),
                        "16-63": PositionTokens(drafted_tokens=15, accepted_tokens=5),
                    }
                }
            )
        ],
    )
    for body in (json.dumps(old), new.model_dump_json()):
        response = app_client.post("/internal/v1/telemetry", content=body, headers=headers)
        assert (response.status_code, response.json()["stored"]) == (200, 1), response.text
    rows = session.scalars(select(TelemetryWindowRow).order_by(TelemetryWindowRow.source)).all()
    assert [(r.source, r.by_response_position) for r in rows] == [
        (
            "gw-new",
            {
                "0-15": {"drafted_tokens": 30, "accepted_tokens": 15},
                "16-63": {"drafted_tokens": 15, "accepted_tokens": 5},
            },
        ),
        ("gw-old", {}),
    ]
    read = {w.pair_version_id: w for w in list_windows(session, start=T0, end=T0 + timedelta(1))}
    assert read[None].by_response_position == {}
    assert read[pv].by_response_position == new.windows[0].by_response_position


def test_a_new_batch_repeating_a_stored_window_counts_it_as_duplicate(session: Session) -> None:
    w = window(7, Arm.SPEC, T0, pair_version_id=3)
    assert ingest_batch(session, TelemetryBatch(gateway_id="gw", window_start=T0, windows=[w])) == (
        TelemetryAck(stored=1, duplicates=0)
    )
    later = T0 + timedelta(seconds=10)
    mixed = TelemetryBatch(
        gateway_id="gw",
        window_start=later,
        windows=[w, window(7, Arm.SPEC, later, pair_version_id=3)],
    )
    assert ingest_batch(session, mixed) == TelemetryAck(stored=1, duplicates=1)
    # Another gateway's window with the same key is its own row.
    other = TelemetryBatch(gateway_id="gw-2", window_start=T0, windows=[w])
    assert ingest_batch(session, other) == TelemetryAck(stored=1, duplicates=0)


def test_unknown_rollout_is_stored_without_it_and_naive_times_read_as_utc(session: Session) -> None:
    naive = T0.replace(tzinfo=None)
    batch = TelemetryBatch(
        gateway_id="gw", window_start=naive, windows=[window(5, Arm.SPEC, naive, rollout_id=424242)]
    )
    assert ingest_batch(session, batch).stored == 1
    row = session.scalars(select(TelemetryWindowRow)).one()
    assert (row.rollout_id, row.segment_id, row.window_start) == (None, 5, T0)


def test_window_reads_filter_and_sum_bucket_wise(session: Session) -> None:
    world = build_world(session)
    rid, pv = world.rollout.id, world.pair_version.id
    for gw, offset, requests, per_position in (
        ("gw-a", 0, 10, [10, 6, 4]),
        ("gw-b", 0, 30, [20, 10]),
        ("gw-a", 10, 5, [3, 1, 1, 1]),
        ("gw-a", 60, 99, [9]),  # outside the range read below
    ):
        start = T0 + timedelta(seconds=offset)
        ingest_batch(
            session,
            TelemetryBatch(
                gateway_id=gw,
                window_start=start,
                windows=[
                    window(
                        world.segment.id,
                        Arm.SPEC,
                        start,
                        rollout_id=rid,
                        pair_version_id=pv,
                        requests=requests,
                        per_position=per_position,
                        ttft=histogram(b3=requests, b60=1),
                    ),
                    window(world.segment.id, Arm.BASELINE, start, rollout_id=rid, requests=1),
                ],
            ),
        )

    end = T0 + timedelta(seconds=60)
    spec = window_totals(session, start=T0, end=end, rollout_id=rid, arm=Arm.SPEC)
    assert spec.windows == 3
    assert (spec.requests, spec.errors, spec.accepted_tokens) == (45, 3, 60)
    assert spec.accepted_per_position == [33, 17, 5, 1]
    assert spec.ttft.counts[3] == 45 and spec.ttft.counts[60] == 3
    assert spec.ttft.total == 48

    by_segment = window_totals(
        session, start=T0, end=end, segment_id=world.segment.id, arm=Arm.BASELINE
    )
    assert (by_segment.windows, by_segment.requests) == (3, 3)
    listed = list_windows(session, start=T0, end=end, rollout_id=rid, pair_version_id=pv)
    assert [w.window_start for w in listed] == [T0, T0, T0 + timedelta(seconds=10)]
    assert all(w.arm is Arm.SPEC and w.segment_id == world.segment.id for w in listed)
    empty = window_totals(session, start=end + timedelta(hours=1), end=end + timedelta(hours=2))
    assert (empty.windows, empty.requests) == (0, 0)


def test_concurrent_duplicate_posts_store_the_batch_exactly_once(
    committed_database: Database,
) -> None:
    """Real transactions on separate connections. The first writer keeps its transaction
    open for a moment, so the others hit the unique key while it is uncommitted."""
    batch = TelemetryBatch(
        gateway_id="gw-race",
        window_start=T0,
        windows=[window(s, Arm.SPEC, T0, pair_version_id=1) for s in (1, 2, 3, 4)],
    )
    threads_n = 4
    barrier = threading.Barrier(threads_n)
    acks: list[TelemetryAck] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def post() -> None:
        try:
            barrier.wait(timeout=10)
            with committed_database.session() as s:
                ack = ingest_batch(s, batch)
                time.sleep(0.3)
            with lock:
                acks.append(ack)
        except BaseException as exc:
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=post) for _ in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    assert errors == []
    assert sorted((a.stored, a.duplicates) for a in acks) == [(0, 4)] * 3 + [(4, 0)]
    with committed_database.session() as s:
        assert s.scalar(select(func.count()).select_from(TelemetryWindowRow)) == 4
        assert s.scalar(select(func.count()).select_from(TelemetryBatchRow)) == 1


def test_values_past_the_columns_are_422_naming_the_field(
    app_client: TestClient, session: Session, internal_headers: dict[str, str]
) -> None:
    headers = internal_headers | {"content-type": "application/json"}
    too_many = TelemetryBatch(
        gateway_id="gw", window_start=T0, windows=[window(1, Arm.SPEC, T0, requests=2**31)]
    )
    nul = TelemetryBatch(gateway_id="gw\x00x", window_start=T0, windows=[])
    for batch, param in ((too_many, "windows.0.requests"), (nul, "gateway_id")):
        resp = app_client.post(
            "/internal/v1/telemetry", content=batch.model_dump_json(), headers=headers
        )
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"]["param"] == param
    assert session.scalar(select(func.count()).select_from(TelemetryBatchRow)) == 0


def test_more_accepted_than_drafted_is_422_naming_the_field_and_stores_nothing(
    app_client: TestClient, session: Session, internal_headers: dict[str, str]
) -> None:
    headers = internal_headers | {"content-type": "application/json"}
    good = window(1, Arm.SPEC, T0, accepted=45).model_dump(mode="json")  # 45 of 45 drafted
    too_many = {**good, "segment_id": 2, "accepted_tokens": 46}
    in_a_bucket = {
        **good,
        "segment_id": 3,
        "by_response_position": {"0-15": {"drafted_tokens": 30, "accepted_tokens": 31}},
    }
    for bad, param in (
        (too_many, "windows.1.accepted_tokens"),
        (in_a_bucket, "windows.1.by_response_position.0-15.accepted_tokens"),
    ):
        body = {"gateway_id": "gw", "window_start": T0.isoformat(), "windows": [good, bad]}
        resp = app_client.post("/internal/v1/telemetry", content=json.dumps(body), headers=headers)
        assert resp.status_code == 422, resp.text
        error = resp.json()["error"]
        assert (error["code"], error["param"]) == ("invalid_value", param)
        assert [e["type"] for e in error["field_errors"]] == ["accepted_exceeds_drafted"]
    assert session.scalar(select(func.count()).select_from(TelemetryBatchRow)) == 0
    assert session.scalar(select(func.count()).select_from(TelemetryWindowRow)) == 0
    body = {"gateway_id": "gw", "window_start": T0.isoformat(), "windows": [good]}
    stored = app_client.post("/internal/v1/telemetry", content=json.dumps(body), headers=headers)
    assert (stored.status_code, stored.json()["stored"]) == (200, 1), stored.text


def test_a_row_stored_with_more_accepted_than_drafted_still_reads(
    app_client: TestClient, session: Session, admin_headers: dict[str, str]
) -> None:
    """Rows stored before ingestion refused accepted > drafted read as they were stored."""
    batch = TelemetryBatch(gateway_id="gw", window_start=T0, windows=[window(1, Arm.SPEC, T0)])
    assert ingest_batch(session, batch).stored == 1
    row = session.scalars(select(TelemetryWindowRow)).one()
    row.accepted_tokens = 50  # of 45 drafted
    row.by_response_position = {"0-15": {"drafted_tokens": 1, "accepted_tokens": 2}}
    session.commit()
    [read] = list_windows(session, start=T0, end=T0 + timedelta(1))
    assert (read.drafted_tokens, read.accepted_tokens) == (45, 50)
    assert {b: t.model_dump() for b, t in read.by_response_position.items()} == {
        "0-15": {"drafted_tokens": 1, "accepted_tokens": 2}
    }
    resp = app_client.get(f"/admin/v1/telemetry/windows?ids={row.id}", headers=admin_headers)
    assert resp.status_code == 200, resp.text
    assert [(w["id"], w["accepted_tokens"]) for w in resp.json()] == [(row.id, 50)]


def test_windows_differing_only_by_rollout_are_both_stored(session: Session) -> None:
    # Two rollouts on one segment (for different models) send baseline windows for
    # the same segment, arm and window: neither may be dropped as a duplicate.
    batch = TelemetryBatch(
        gateway_id="gw",
        window_start=T0,
        windows=[
            window(7, Arm.BASELINE, T0, rollout_id=101, requests=3),
            window(7, Arm.BASELINE, T0, rollout_id=102, requests=4),
        ],
    )
    assert ingest_batch(session, batch) == TelemetryAck(stored=2, duplicates=0)
    rows = session.scalars(select(TelemetryWindowRow).order_by(TelemetryWindowRow.id)).all()
    # Unknown rollouts are not linked, but their reported ids still key the windows.
    assert [(r.rollout_id, r.rollout_key, r.requests) for r in rows] == [
        (None, 101, 3),
        (None, 102, 4),
    ]
