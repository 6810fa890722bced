"""GET /internal/v1/snapshot: compiled content, ETag/304, version bumps, auth."""

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from control.models import AuditEvent, Worker
from control.rollouts.service import transition_rollout
from control.rollouts.state_machine import RolloutAction
from control.snapshot.service import SnapshotService
from control.snapshot.version import bump_snapshot_version, current_snapshot_version
from specwire import PolicySnapshot, QuotaWeights, RequestFeatures, RolloutState
from tests.control.internal.factories import beat, build_world
from tests.fixtures.db import AgentHeaders

URL = "/internal/v1/snapshot"


def test_snapshot_compiles_every_part_of_the_live_state(
    app_client: TestClient,
    session: Session,
    internal_headers: dict[str, str],
    agent_headers: AgentHeaders,
) -> None:
    world = build_world(session)
    session.commit()
    ack = app_client.post(
        "/internal/v1/workers/w-spec-1/heartbeat",
        json=beat(world.spec_pool.id).model_dump(mode="json"),
        headers=agent_headers(world.spec_pool.id),
    )
    assert ack.status_code == 200

    resp = app_client.get(URL, headers=internal_headers)

    assert resp.status_code == 200
    assert resp.headers["cache-control"] == "no-cache"
    snap = PolicySnapshot.model_validate_json(resp.content)
    assert resp.headers["etag"] == f'"{snap.version}"'
    assert snap.version == current_snapshot_version(session) == ack.json()["snapshot_version"]
    assert snap.ttl_seconds == 30.0
    assert [(s.id, s.name, s.priority) for s in snap.segments] == [
        (world.segment.id, "code-greedy", 10)
    ]
    assert snap.segments[0].selector.tasks == ["code"]
    features = RequestFeatures(tenant="acme", task="code", model="tiny", temperature=0.0)
    assert snap.segment_for(features) is not None
    assert snap.segment_for(features.model_copy(update={"temperature": 0.7})) is None

    (rollout,) = snap.rollouts
    assert rollout.model_dump() == {
        "id": world.rollout.id,
        "segment_id": world.segment.id,
        "pair_version_id": world.pair_version.id,
        "spec_pool_id": world.spec_pool.id,
        "baseline_pool_id": world.baseline_pool.id,
        "state": RolloutState.CANARY,
        "percentage": 5.0,
        "holdout_percentage": 0.0,  # a holdout only at full
        "cohort_salt": "salt-123",
        "version": 4,
        "contract_percentage": 2.0,  # the threshold set's paired-check share, while exposed
        "depth_ladder": None,  # none set
    }

    (pv,) = snap.pair_versions
    assert (pv.label, pv.method, pv.num_speculative_tokens) == ("tiny-code-v3", "draft_model", 3)
    assert (pv.draft_ref, pv.draft_sample_method) == ("/models/tiny-draft", "probabilistic")
    assert (pv.capabilities.structured_output, pv.capabilities.penalties) == (True, False)

    pools = {p.name: p for p in snap.pools}
    assert pools["tiny-spec"].pair_version_id == world.pair_version.id
    assert pools["tiny-base"].is_baseline
    (worker,) = pools["tiny-spec"].workers
    assert (worker.id, worker.healthy, worker.draft_loaded) == ("w-spec-1", True, True)
    assert (worker.endpoint_url, worker.kv_cache_usage) == ("http://127.0.0.1:8101", 0.25)
    assert pools["tiny-base"].workers == []

    (tenant,) = snap.tenants
    # The revoked key is left out: the gateway must reject it.
    assert tenant.key_hashes == ["1" * 64]
    assert (tenant.allowed_models, tenant.override_allowed) == (["tiny"], True)
    assert tenant.quota.weighted_tokens_per_minute == 60_000
    assert snap.quota_weights.model_dump() == {
        "prompt": 1.0,
        "completion": 1.0,
        "rejected_draft": 0.0,
    }


def test_etag_round_trip_answers_304_until_a_change(
    app_client: TestClient, session: Session, internal_headers: dict[str, str]
) -> None:
    build_world(session)
    session.commit()
    first = app_client.get(URL, headers=internal_headers)
    etag = first.headers["etag"]

    same = app_client.get(URL, headers=internal_headers | {"If-None-Match": etag})
    weak_in_list = app_client.get(
        URL, headers=internal_headers | {"If-None-Match": f'"999999", W/{etag}'}
    )
    assert (same.status_code, same.content, same.headers["etag"]) == (304, b"", etag)
    assert same.headers["cache-control"] == "no-cache"
    assert weak_in_list.status_code == 304

    bump_snapshot_version(session)
    session.commit()
    changed = app_client.get(URL, headers=internal_headers | {"If-None-Match": etag})
    assert changed.status_code == 200
    new_version = PolicySnapshot.model_validate_json(changed.content).version
    assert changed.headers["etag"] == f'"{new_version}"'
    assert new_version == int(etag.strip('"')) + 1


def test_reads_and_unchanged_heartbeats_do_not_bump_the_version(
    app_client: TestClient,
    session: Session,
    internal_headers: dict[str, str],
    agent_headers: AgentHeaders,
) -> None:
    world = build_world(session)
    session.commit()
    body = beat(world.spec_pool.id).model_dump(mode="json")
    app_client.post(
        "/internal/v1/workers/w1/heartbeat", json=body, headers=agent_headers(world.spec_pool.id)
    )
    before = current_snapshot_version(session)

    for _ in range(3):
        assert app_client.get(URL, headers=internal_headers).status_code == 200
    load_only = body | {"kv_cache_usage": 0.5, "running": 7, "waiting": 3}
    ack = app_client.post(
        "/internal/v1/workers/w1/heartbeat",
        json=load_only,
        headers=agent_headers(world.spec_pool.id),
    )

    assert ack.json()["snapshot_version"] == before
    assert current_snapshot_version(session) == before
    service = app_client.app.state.snapshot_service  # type: ignore[attr-defined]
    # Polls of one version compile once.
    assert service.compilations == 1


def test_a_stale_worker_leaves_the_healthy_set_and_bumps_the_version(
    app_client: TestClient,
    session: Session,
    internal_headers: dict[str, str],
    agent_headers: AgentHeaders,
) -> None:
    world = build_world(session)
    session.commit()
    body = beat(world.spec_pool.id).model_dump(mode="json")
    app_client.post(
        "/internal/v1/workers/w1/heartbeat", json=body, headers=agent_headers(world.spec_pool.id)
    )
    app_client.post(
        "/internal/v1/workers/w2/heartbeat", json=body, headers=agent_headers(world.spec_pool.id)
    )
    fresh = app_client.get(URL, headers=internal_headers)
    assert [
        w.healthy for w in PolicySnapshot.model_validate_json(fresh.content).pools[0].workers
    ] == [True, True]

    # w1's agent stopped beating 16 s ago (staleness is 15 s by default).
    session.execute(
        update(Worker)
        .where(Worker.id == "w1")
        .values(last_heartbeat_at=datetime.now(UTC) - timedelta(seconds=16))
    )
    session.commit()
    stale = app_client.get(URL, headers=internal_headers | {"If-None-Match": fresh.headers["etag"]})

    assert stale.status_code == 200
    snap = PolicySnapshot.model_validate_json(stale.content)
    assert snap.version == int(fresh.headers["etag"].strip('"')) + 1
    assert {w.id: w.healthy for w in snap.pools[0].workers} == {"w1": False, "w2": True}
    session.expire_all()
    assert session.get(Worker, "w1").healthy is False  # type: ignore[union-attr]
    audit = session.scalars(select(AuditEvent).where(AuditEvent.action == "worker.stale")).one()
    assert (audit.entity_id, audit.after) == ("w1", {"healthy": False})
    # A second poll finds nothing new to sweep: same version, 304.
    again = app_client.get(URL, headers=internal_headers | {"If-None-Match": stale.headers["etag"]})
    assert again.status_code == 304


def test_compiler_treats_a_not_yet_swept_stale_worker_as_unhealthy(session: Session) -> None:
    world = build_world(session)
    session.add(
        Worker(
            id="w-old",
            pool_id=world.spec_pool.id,
            endpoint_url="http://w-old",
            healthy=True,
            last_heartbeat_at=datetime.now(UTC) - timedelta(seconds=20),
        )
    )
    session.flush()
    service = SnapshotService(
        ttl_seconds=10.0,
        stale_after=timedelta(seconds=15),
        quota_weights=QuotaWeights(prompt=1.0, completion=2.0, rejected_draft=0.5),
    )
    stamp = (current_snapshot_version(session), None)
    snap = PolicySnapshot.model_validate_json(service.compiled_for(session, stamp).body)
    assert [(w.id, w.healthy) for w in snap.pools[0].workers] == [("w-old", False)]
    assert snap.ttl_seconds == 10.0
    assert snap.quota_weights.completion == 2.0


def test_internal_routes_need_the_internal_token(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        admin_headers,
        {"Authorization": "Basic x"},
    ):
        resp = app_client.get(URL, headers=headers)
        assert resp.status_code == 401, headers
        assert resp.headers["www-authenticate"] == "Bearer"
        assert resp.json()["error"]["type"] == "authentication_error"
    posted = app_client.post("/internal/v1/telemetry", json={})
    assert posted.status_code == 401
    spec = app_client.get("/internal/v1/pools/1/spec")
    assert spec.status_code == 401


def test_a_rollout_flip_reaches_the_next_poll(
    app_client: TestClient, session: Session, internal_headers: dict[str, str]
) -> None:
    """The automation's and the admin's flips go through transition_rollout; a gateway
    holding the previous ETag gets the new state on its next poll."""
    world = build_world(session)
    session.commit()
    before = app_client.get(URL, headers=internal_headers)

    transition_rollout(
        session,
        world.rollout.id,
        RolloutAction.DISABLE,
        expected_version=4,
        actor="automation:test",
        reason="acceptance below threshold",
        evidence={"acceptance_rate": 0.1},
        task_id="task-1",
        kind="auto_disable",
    )
    session.commit()
    after = app_client.get(
        URL, headers=internal_headers | {"If-None-Match": before.headers["etag"]}
    )

    assert after.status_code == 200
    (rollout,) = PolicySnapshot.model_validate_json(after.content).rollouts
    assert (rollout.state, rollout.percentage, rollout.version) == (RolloutState.DISABLED, 0.0, 5)
    assert not rollout.exposing
