"""POST /internal/v1/workers/{id}/heartbeat: registration, updates, flips, memory beats."""

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import AuditEvent, Worker
from control.snapshot.version import current_snapshot_version
from control.workers.service import record_heartbeat, sweep_stale_workers
from tests.control.internal.factories import beat, build_world
from tests.fixtures.db import AgentHeaders


def _post(
    client: TestClient, headers: AgentHeaders, worker_id: str, *, pool_id: int, **fields: Any
) -> dict[str, Any]:
    resp = client.post(
        f"/internal/v1/workers/{worker_id}/heartbeat",
        content=beat(pool_id, **fields).model_dump_json(),
        headers=headers(pool_id) | {"content-type": "application/json"},
    )
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def _audit(session: Session, worker_id: str) -> list[tuple[str, Any, Any]]:
    rows = session.scalars(
        select(AuditEvent)
        .where(AuditEvent.entity_type == "worker", AuditEvent.entity_id == worker_id)
        .order_by(AuditEvent.id)
    )
    return [(r.action, r.before, r.after) for r in rows]


def test_first_beat_registers_then_later_beats_update(
    app_client: TestClient, session: Session, agent_headers: AgentHeaders
) -> None:
    world = build_world(session)
    session.commit()
    start = current_snapshot_version(session)

    first = _post(app_client, agent_headers, "w1", pool_id=world.spec_pool.id)
    assert first == {"worker_id": "w1", "registered": True, "snapshot_version": start + 1}
    second = _post(
        app_client,
        agent_headers,
        "w1",
        pool_id=world.spec_pool.id,
        kv_cache_usage=0.4,
        running=9,
        waiting=4,
        engine_version="0.32.0",
        process_memory_bytes=123456,
        spec={"num_drafts": 10, "num_draft_tokens": 30, "num_accepted_tokens": 21},
    )
    # Load changes alone do not bump; the engine version now reported does (gateways
    # keep a pair version off workers of another engine version).
    assert second == {"worker_id": "w1", "registered": False, "snapshot_version": start + 2}

    session.expire_all()
    worker = session.get(Worker, "w1")
    assert worker is not None
    assert (worker.pool_id, worker.endpoint_url) == (world.spec_pool.id, "http://127.0.0.1:8101")
    assert (worker.healthy, worker.draft_loaded) == (True, True)
    assert (worker.kv_cache_usage, worker.running, worker.waiting) == (0.4, 9, 4)
    assert (worker.engine_version, worker.process_memory_bytes) == ("0.32.0", 123456)
    assert worker.spec_counters is not None and worker.spec_counters["num_accepted_tokens"] == 21
    assert worker.last_heartbeat_at >= worker.first_seen_at
    register, upgrade = _audit(session, "w1")
    assert register[0] == "worker.register"
    assert (upgrade[1]["engine_version"], upgrade[2]["engine_version"]) == (None, "0.32.0")
    assert register[2] == {
        "pool_id": world.spec_pool.id,
        "endpoint_url": "http://127.0.0.1:8101",
        "healthy": True,
        "draft_loaded": True,
        "engine_version": None,
        "engine_build": None,
        "model_digest": None,
    }


def test_health_and_draft_flips_bump_the_snapshot_and_are_audited(
    app_client: TestClient, session: Session, agent_headers: AgentHeaders
) -> None:
    world = build_world(session)
    session.commit()
    pool = world.spec_pool.id
    v0 = _post(app_client, agent_headers, "w1", pool_id=pool)["snapshot_version"]

    v1 = _post(app_client, agent_headers, "w1", pool_id=pool, healthy=False)["snapshot_version"]
    v2 = _post(app_client, agent_headers, "w1", pool_id=pool, healthy=False)["snapshot_version"]
    v3 = _post(app_client, agent_headers, "w1", pool_id=pool, healthy=True, draft_loaded=False)[
        "snapshot_version"
    ]
    v4 = _post(
        app_client,
        agent_headers,
        "w1",
        pool_id=pool,
        endpoint_url="http://10.0.0.2:8000",
        draft_loaded=False,
    )["snapshot_version"]

    assert (v1, v2, v3, v4) == (v0 + 1, v0 + 1, v0 + 2, v0 + 3)
    actions = _audit(session, "w1")
    assert [a for a, _, _ in actions] == ["worker.register"] + ["worker.update"] * 3
    assert (actions[1][1]["healthy"], actions[1][2]["healthy"]) == (True, False)
    assert actions[2][2]["draft_loaded"] is False
    assert actions[3][2]["endpoint_url"] == "http://10.0.0.2:8000"


def test_high_kv_cache_beats_are_counted_against_the_rollouts_threshold(
    app_client: TestClient, session: Session, agent_headers: AgentHeaders
) -> None:
    # The rollout using this spec pool allows 80 % KV cache; the setting (90 %) is looser.
    world = build_world(session, max_kv_cache_usage=0.8)
    session.commit()
    spec, base = world.spec_pool.id, world.baseline_pool.id
    counts = []
    for usage in (0.85, 0.95, 0.81, 0.5, 0.9):
        _post(app_client, agent_headers, "spec-w", pool_id=spec, kv_cache_usage=usage)
        session.expire_all()
        counts.append(session.get(Worker, "spec-w").high_memory_beats)  # type: ignore[union-attr]
    assert counts == [1, 2, 3, 0, 1]

    # No rollout uses the baseline pool as its spec arm: the 0.9 setting applies.
    base_counts = []
    for usage in (0.85, 0.95):
        _post(app_client, agent_headers, "base-w", pool_id=base, kv_cache_usage=usage)
        session.expire_all()
        base_counts.append(session.get(Worker, "base-w").high_memory_beats)  # type: ignore[union-attr]
    assert base_counts == [0, 1]


def test_an_enrolment_for_a_missing_pool_is_403_and_writes_nothing(
    app_client: TestClient, session: Session, agent_headers: AgentHeaders
) -> None:
    resp = app_client.post(
        "/internal/v1/workers/ghost/heartbeat",
        content=beat(pool_id=987654).model_dump_json(),
        # An enrolment naming a pool that does not exist: enrolled for nothing.
        headers=agent_headers(987654) | {"content-type": "application/json"},
    )
    assert resp.status_code == 403
    error = resp.json()["error"]
    assert (error["type"], error["code"]) == ("permission_error", "pool_not_enrolled")
    assert session.get(Worker, "ghost") is None
    assert _audit(session, "ghost") == []


def test_invalid_heartbeat_is_422_with_field_errors(
    app_client: TestClient, session: Session, agent_headers: AgentHeaders
) -> None:
    world = build_world(session)
    session.commit()
    body = beat(world.spec_pool.id).model_dump(mode="json") | {"kv_cache_usage": 1.5}
    resp = app_client.post(
        "/internal/v1/workers/w1/heartbeat", json=body, headers=agent_headers(world.spec_pool.id)
    )
    assert resp.status_code == 422
    fields = [e["loc"] for e in resp.json()["error"]["field_errors"]]
    assert ["body", "kv_cache_usage"] in fields
    assert session.get(Worker, "w1") is None


def test_injected_clock_sets_beat_and_audit_times_and_drives_the_sweep(session: Session) -> None:
    world = build_world(session)
    t0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    ack = record_heartbeat(
        session, "w1", beat(world.spec_pool.id), default_kv_cache_limit=0.9, now=t0
    )
    worker = session.get(Worker, "w1")
    assert worker is not None and worker.last_heartbeat_at == t0
    register = session.scalars(select(AuditEvent).where(AuditEvent.entity_id == "w1")).one()
    assert register.created_at == t0

    stale_after = timedelta(seconds=15)
    assert sweep_stale_workers(session, stale_after=stale_after, now=t0 + stale_after) == []
    later = t0 + stale_after + timedelta(seconds=1)
    assert sweep_stale_workers(session, stale_after=stale_after, now=later) == ["w1"]
    assert current_snapshot_version(session) == ack.snapshot_version + 1
    assert worker.healthy is False
    stale = session.scalars(select(AuditEvent).where(AuditEvent.action == "worker.stale")).one()
    assert (stale.entity_id, stale.created_at) == ("w1", later)
    # Already unhealthy: a second sweep neither flips nor bumps.
    assert sweep_stale_workers(session, stale_after=stale_after, now=later) == []
    assert current_snapshot_version(session) == ack.snapshot_version + 1


def test_real_engine_memory_sizes_are_stored(
    app_client: TestClient, session: Session, agent_headers: AgentHeaders
) -> None:
    """A vLLM server's memory is above 2 GiB: on PostgreSQL a 32-bit column made every
    real heartbeat fail."""
    world = build_world(session)
    session.commit()
    _post(
        app_client,
        agent_headers,
        "w-big",
        pool_id=world.spec_pool.id,
        process_memory_bytes=6 * 2**30,
        gpu_memory_bytes=141 * 10**9,
    )
    session.expire_all()
    worker = session.get(Worker, "w-big")
    assert worker is not None
    assert (worker.process_memory_bytes, worker.gpu_memory_bytes) == (6 * 2**30, 141 * 10**9)


def test_heartbeat_values_past_the_columns_are_rejected(
    app_client: TestClient, session: Session, agent_headers: AgentHeaders
) -> None:
    world = build_world(session)
    session.commit()
    json_type = {"content-type": "application/json"}
    cases: tuple[tuple[str, dict[str, Any], int, str | None], ...] = (
        ("w1", {"endpoint_url": "http://x/\x00"}, 422, "endpoint_url"),
        ("w1", {"endpoint_url": "http://" + "x" * 600}, 422, "endpoint_url"),
        ("w1", {"running": 2**31}, 422, "running"),
        ("w" * 201, {}, 422, "worker_id"),
        ("w1", {"pool_id": 2**40}, 403, "pool_id"),
    )
    for worker_id, fields, status, param in cases:
        # Fields merged into the JSON: the contract model itself refuses bad URLs now.
        body = json.dumps(beat(pool_id=world.spec_pool.id).model_dump(mode="json") | fields)
        resp = app_client.post(
            f"/internal/v1/workers/{worker_id}/heartbeat",
            content=body,
            headers=agent_headers(fields.get("pool_id", world.spec_pool.id)) | json_type,
        )
        assert resp.status_code == status, (fields, resp.text)
        assert resp.json()["error"]["param"] == param
    assert session.scalars(select(Worker)).all() == []
