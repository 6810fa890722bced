"""First writes on a fresh database race for the snapshot row without failing, and a
held lock ends in 503 + Retry-After within the lock timeout, not a long wait."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from control.db import Database
from control.models import SnapshotState, Tenant
from control.settings import ControlSettings


def test_concurrent_first_writes_on_a_fresh_database_all_succeed(
    control_app: FastAPI,
    control_settings: ControlSettings,
    committed_database: Database,
    admin_headers: dict[str, str],
) -> None:
    with committed_database.session() as s:
        assert s.scalar(select(SnapshotState)) is None  # fresh: no snapshot row yet
    control_app.state.settings = control_settings
    control_app.state.database = committed_database
    start = threading.Barrier(6)
    with TestClient(control_app, raise_server_exceptions=False) as client:

        def create(i: int) -> int:
            start.wait()
            return client.post(
                "/admin/v1/tenants", json={"name": f"first-{i}"}, headers=admin_headers
            ).status_code

        with ThreadPoolExecutor(6) as pool:
            statuses = list(pool.map(create, range(6)))
    assert statuses == [201] * 6
    with committed_database.session() as s:
        assert s.scalar(select(SnapshotState.version)) == 6
        assert len(s.scalars(select(Tenant)).all()) == 6


def test_a_held_table_lock_is_503_with_retry_after_within_the_lock_timeout(
    control_app: FastAPI,
    control_settings: ControlSettings,
    db_url: str,
    committed_database: Database,
    admin_headers: dict[str, str],
) -> None:
    if not db_url.startswith("postgresql"):
        pytest.skip("lock_timeout is PostgreSQL's; SQLite's busy timeout is tested elsewhere")
    database = Database(db_url, lock_timeout_ms=300, statement_timeout_ms=5000)
    control_app.state.settings = control_settings
    control_app.state.database = database
    holder = committed_database.engine.connect()
    try:
        holder.execute(text("LOCK TABLE tenants IN ACCESS EXCLUSIVE MODE"))
        with TestClient(control_app, raise_server_exceptions=False) as client:
            started = time.monotonic()
            response = client.post(
                "/admin/v1/tenants", json={"name": "blocked"}, headers=admin_headers
            )
            waited = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()
        database.dispose()
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert response.json()["error"]["code"] == "database_busy"
    assert waited < 3.0
