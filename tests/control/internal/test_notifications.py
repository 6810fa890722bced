"""Change notifications after a committed bump: Redis pub/sub and PostgreSQL NOTIFY.

These need real commits (a rolled-back outer transaction never notifies), so
they run on `committed_database` and clean up after themselves.
"""

import time
from collections.abc import Iterator

import psycopg
import pytest
import redis
from fastapi.testclient import TestClient

from control.app import create_app
from control.db import Database
from control.settings import ControlSettings
from control.snapshot.notifier import PG_CHANNEL, install_snapshot_notifier
from control.snapshot.version import bump_snapshot_version, current_snapshot_version
from specwire import SNAPSHOT_CHANNEL
from tests.control.internal.factories import beat, build_world
from tests.fixtures.db import enrol_agent
from tests.fixtures.services import require_redis


@pytest.fixture
def redis_url() -> str:
    return require_redis()


@pytest.fixture
def notifying_client(
    control_settings: ControlSettings, committed_database: Database, redis_url: str
) -> Iterator[TestClient]:
    settings = control_settings.model_copy(update={"redis_url": redis_url})
    with TestClient(create_app(settings, database=committed_database)) as client:
        yield client


def _next_message(pubsub: redis.client.PubSub, timeout_s: float = 5.0) -> str | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.2)
        if message is not None and message["type"] == "message":
            return str(message["data"].decode())
    return None


def test_heartbeat_that_changes_the_snapshot_is_published_on_redis(
    notifying_client: TestClient,
    committed_database: Database,
    redis_url: str,
    internal_headers: dict[str, str],
) -> None:
    with committed_database.session() as s:
        pool_id = build_world(s).spec_pool.id
    client = redis.Redis.from_url(redis_url)
    pubsub = client.pubsub()  # type: ignore[no-untyped-call, unused-ignore]  # untyped before redis 8.2
    pubsub.subscribe(SNAPSHOT_CHANNEL)
    try:
        assert pubsub.get_message(timeout=2)["type"] == "subscribe"
        body = beat(pool_id).model_dump_json()
        with committed_database.session() as s:
            agent = enrol_agent(s, pool_id)
        headers = agent | {"content-type": "application/json"}
        url = "/internal/v1/workers/w1/heartbeat"

        registered = notifying_client.post(url, content=body, headers=headers).json()
        assert _next_message(pubsub) == str(registered["snapshot_version"])
        # Same routing fields: no bump, so nothing is published.
        notifying_client.post(url, content=body, headers=headers)
        assert _next_message(pubsub, timeout_s=0.6) is None
        # The admin side's commits go through the same sessionmaker.
        with committed_database.session() as s:
            version = bump_snapshot_version(s)
        assert _next_message(pubsub) == str(version)
    finally:
        pubsub.close()
        client.close()


def test_postgres_listen_receives_the_new_version(
    committed_database: Database, db_backend: str
) -> None:
    if db_backend != "postgresql":
        pytest.skip("NOTIFY is PostgreSQL only; SQLite gateways poll")
    notifier = install_snapshot_notifier(committed_database, redis_url=None)
    dsn = committed_database.engine.url.set(drivername="postgresql").render_as_string(
        hide_password=False
    )
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute(f"LISTEN {PG_CHANNEL}")
        with committed_database.session() as s:
            version = bump_snapshot_version(s)
        received = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert received == [str(version)]
    assert notifier.failures == 0


def test_rolled_back_bump_is_never_announced(committed_database: Database, db_backend: str) -> None:
    if db_backend != "postgresql":
        pytest.skip("NOTIFY is PostgreSQL only")
    install_snapshot_notifier(committed_database, redis_url=None)
    dsn = committed_database.engine.url.set(drivername="postgresql").render_as_string(
        hide_password=False
    )
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute(f"LISTEN {PG_CHANNEL}")
        with pytest.raises(RuntimeError), committed_database.session() as s:
            bump_snapshot_version(s)
            raise RuntimeError("the change failed")
        received = [n.payload for n in listener.notifies(timeout=0.5, stop_after=1)]
    assert received == []


def test_publishing_failure_never_fails_the_commit(bound_database: Database) -> None:
    # NOTE: nothing listens on port 1: an unreachable Redis is the fault under test.
    notifier = install_snapshot_notifier(bound_database, redis_url="redis://127.0.0.1:1/0")
    with bound_database.session() as s:
        version = bump_snapshot_version(s)
    with bound_database.session() as s:
        assert current_snapshot_version(s) == version
    assert notifier.failures == 1
