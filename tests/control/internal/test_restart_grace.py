"""After a control-plane outage longer than the staleness limit, the first snapshots
must not mark every worker unhealthy: staleness is judged from heartbeats received
since the restart, with one heartbeat interval of grace."""

from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session

from control.models import Worker
from control.settings import ControlSettings
from control.snapshot.service import SnapshotService
from specwire import PolicySnapshot
from tests.control.internal.factories import beat, build_world
from tests.fixtures.db import AgentHeaders, TransactionBoundDatabase

URL = "/internal/v1/snapshot"


@pytest.fixture
def control_settings(control_settings: ControlSettings) -> ControlSettings:
    return control_settings.model_copy(update={"worker_restart_grace_s": 5.0})


def _healthy(client: TestClient, headers: dict[str, str]) -> dict[str, bool]:
    snapshot = PolicySnapshot.model_validate_json(client.get(URL, headers=headers).content)
    return {w.id: w.healthy for p in snapshot.pools for w in p.workers}


def test_workers_silent_during_a_control_outage_stay_healthy_through_the_grace(
    control_app: FastAPI,
    control_settings: ControlSettings,
    bound_database: TransactionBoundDatabase,
    session: Session,
    internal_headers: dict[str, str],
    agent_headers: AgentHeaders,
) -> None:
    world = build_world(session)
    session.commit()
    control_app.state.settings = control_settings
    control_app.state.database = bound_database
    with TestClient(control_app) as before_outage:
        for worker in ("w1", "w2"):
            resp = before_outage.post(
                f"/internal/v1/workers/{worker}/heartbeat",
                json=beat(world.spec_pool.id).model_dump(mode="json"),
                headers=agent_headers(world.spec_pool.id),
            )
            assert resp.status_code == 200
    # Control was down for a minute (staleness is 15 s): nobody could beat meanwhile.
    session.execute(
        update(Worker).values(last_heartbeat_at=datetime.now(UTC) - timedelta(seconds=60))
    )
    session.commit()

    with TestClient(control_app) as restarted:  # a new process: a new snapshot service
        service = control_app.state.snapshot_service
        assert isinstance(service, SnapshotService)
        assert _healthy(restarted, internal_headers) == {"w1": True, "w2": True}
        # One agent beats within the grace; the other never comes back.
        restarted.post(
            "/internal/v1/workers/w1/heartbeat",
            json=beat(world.spec_pool.id).model_dump(mode="json"),
            headers=agent_headers(world.spec_pool.id),
        )
        # The grace ends (one heartbeat interval after the start): normal staleness.
        assert service.grace_until is not None
        service.grace_until = datetime.now(UTC) - timedelta(seconds=1)
        assert _healthy(restarted, internal_headers) == {"w1": True, "w2": False}
