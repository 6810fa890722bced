"""Control's probes on a real server: `/healthz` never touches the database,
`/readyz` is ready only when the database answers and its schema is at head, and
every response carries a request id (the caller's when it is inert)."""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from control.app import create_app
from control.health import schema_head
from control.migrate import downgrade, upgrade
from control.settings import ControlSettings
from tests.fixtures.db import _create_postgres_database, _drop_postgres_database
from tests.fixtures.services import require_postgres
from tests.gateway.server import free_port, serve_app


def settings_for(url: str, tmp_path: Path, **extra: object) -> ControlSettings:
    return ControlSettings(
        data_dir=tmp_path,
        database_url=url,
        admin_token="probe-admin",
        internal_token="probe-internal",
        **extra,  # type: ignore[arg-type]
    )


@contextmanager
def control_on(url: str, tmp_path: Path, **extra: object) -> Iterator[str]:
    with serve_app(create_app(settings_for(url, tmp_path, **extra))) as base:
        yield base


def previous_revision(head: str) -> str:
    from alembic.script import ScriptDirectory

    from control.migrate import alembic_config

    down = ScriptDirectory.from_config(alembic_config()).get_revision(head).down_revision
    assert isinstance(down, str)
    return down


def test_ready_only_at_head_and_live_throughout(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    head = schema_head()
    assert head is not None
    upgrade(url, previous_revision(head))
    with control_on(url, tmp_path) as base:
        behind = httpx.get(f"{base}/readyz")
        assert behind.status_code == 503
        body = behind.json()
        assert body["ready"] is False
        assert body["schema_head"] == head
        assert body["schema_revision"] == previous_revision(head)
        assert "specroute control migrate" in body["reason"]
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}

        upgrade(url)
        ready = httpx.get(f"{base}/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"ready": True, "schema_revision": head}

        downgrade(url, "base")
        empty = httpx.get(f"{base}/readyz")
        assert empty.status_code == 503 and empty.json()["schema_revision"] is None


def test_not_ready_when_postgres_refuses_connections(tmp_path: Path) -> None:
    dead = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"
    with control_on(dead, tmp_path) as base:
        started = time.monotonic()
        response = httpx.get(f"{base}/readyz", timeout=10.0)
        assert time.monotonic() - started < 5.0
        assert response.status_code == 503
        assert response.json()["reason"] == "the database is unreachable: OperationalError"
        assert httpx.get(f"{base}/healthz").status_code == 200


@contextmanager
def silent_server() -> Iterator[int]:
    """A TCP server that accepts connections and never answers: a database host
    that hangs (half-dead node, blackholed route) rather than refusing."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join(2.0)
        for conn in held:
            conn.close()
        listener.close()


def test_readiness_answers_within_its_timeout_when_the_database_hangs(tmp_path: Path) -> None:
    with silent_server() as port:
        url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/test"
        with control_on(url, tmp_path, readiness_timeout_s=0.5) as base:
            started = time.monotonic()
            response = httpx.get(f"{base}/readyz", timeout=10.0)
            took = time.monotonic() - started
    assert response.status_code == 503
    assert response.json()["reason"] == "the database did not answer within 0.5 s"
    assert 0.4 < took < 3.0, took


@pytest.mark.postgres
def test_ready_on_a_migrated_postgres(tmp_path: Path) -> None:
    admin_url = require_postgres()
    name, url = _create_postgres_database(admin_url)
    try:
        with control_on(url, tmp_path) as base:
            assert httpx.get(f"{base}/readyz").status_code == 503
            upgrade(url)
            ready = httpx.get(f"{base}/readyz")
            assert ready.status_code == 200 and ready.json()["schema_revision"] == schema_head()
    finally:
        _drop_postgres_database(admin_url, name)


def test_responses_carry_the_callers_request_id_or_a_fresh_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    upgrade(url)
    with control_on(url, tmp_path) as base:
        given = httpx.get(f"{base}/admin/v1/pairs", headers={"x-request-id": "trace-7"})
        assert given.status_code == 401  # no token: errors carry the id too
        assert given.headers["x-request-id"] == "trace-7"
        hostile = httpx.get(f"{base}/healthz", headers={"x-request-id": "a b\tc"})
        fresh = hostile.headers["x-request-id"]
        assert fresh != "a b\tc" and len(fresh) == 32 and int(fresh, 16) >= 0
        assert httpx.get(f"{base}/healthz").headers["x-request-id"] != fresh


@pytest.mark.parametrize(
    ("surfaces", "admin_status", "internal_status"),
    [(["admin"], 401, 404), (["internal"], 404, 401), (["admin", "internal"], 401, 401)],
)
def test_a_process_serves_only_its_api_surfaces(
    tmp_path: Path, surfaces: list[str], admin_status: int, internal_status: int
) -> None:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    upgrade(url)
    with control_on(url, tmp_path, api_surfaces=surfaces) as base:
        assert httpx.get(f"{base}/admin/v1/pairs").status_code == admin_status
        assert httpx.get(f"{base}/internal/v1/snapshot").status_code == internal_status
        assert httpx.get(f"{base}/readyz").status_code == 200
        assert httpx.get(f"{base}/metrics").status_code == 200
