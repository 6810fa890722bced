"""The snapshot carries the engine version a pair was validated on and the one each
worker reports, and a worker that changes its engine version bumps the snapshot."""

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from specwire import PolicySnapshot
from tests.control.internal.factories import beat, build_world
from tests.fixtures.db import AgentHeaders

URL = "/internal/v1/snapshot"


def test_engine_versions_reach_the_snapshot_and_a_change_bumps_it(
    app_client: TestClient,
    session: Session,
    internal_headers: dict[str, str],
    agent_headers: AgentHeaders,
) -> None:
    world = build_world(session)
    session.commit()
    spec = world.spec_pool.id
    headers = agent_headers(spec)

    def post(version: str) -> int:
        ack = app_client.post(
            "/internal/v1/workers/w1/heartbeat",
            json=beat(spec, engine_version=version).model_dump(mode="json"),
            headers=headers,
        )
        assert ack.status_code == 200, ack.text
        return int(ack.json()["snapshot_version"])

    first = post("0.32.0")
    snapshot = PolicySnapshot.model_validate_json(
        app_client.get(URL, headers=internal_headers).content
    )
    assert {pv.engine_version for pv in snapshot.pair_versions} == {"0.32.0"}  # as registered
    (worker,) = next(p for p in snapshot.pools if p.id == spec).workers
    assert worker.engine_version == "0.32.0"
    assert post("0.32.0") == first  # unchanged: no bump
    assert post("0.33.0") == first + 1  # upgraded in place: gateways must learn it
