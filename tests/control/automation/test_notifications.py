"""Flips made inside the Celery worker publish snapshot notifications like the API does."""

import time
from pathlib import Path

import redis

from control.automation.app import create_celery_app
from control.migrate import upgrade
from control.settings import ControlSettings
from control.snapshot.version import bump_snapshot_version
from specwire import SNAPSHOT_CHANNEL
from tests.fixtures.services import require_redis


def test_worker_database_publishes_snapshot_bumps_on_redis(tmp_path: Path) -> None:
    redis_url = require_redis()
    db_url = f"sqlite:///{tmp_path / 'control.db'}"
    upgrade(db_url)
    settings = ControlSettings(
        data_dir=tmp_path,
        database_url=db_url,
        redis_url=redis_url,
        broker_url=f"sqla+sqlite:///{tmp_path / 'broker.db'}",
        result_backend=f"db+sqlite:///{tmp_path / 'results.db'}",
    )
    app = create_celery_app(settings)
    client = redis.Redis.from_url(redis_url)
    pubsub = client.pubsub()  # type: ignore[no-untyped-call, unused-ignore]  # untyped before redis 8.2
    pubsub.subscribe(SNAPSHOT_CHANNEL)
    assert pubsub.get_message(timeout=2)["type"] == "subscribe"

    with app.database.session() as session:
        version = bump_snapshot_version(session)

    deadline = time.monotonic() + 5
    message = None
    while message is None and time.monotonic() < deadline:
        message = pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
    pubsub.close()
    app.database.dispose()
    assert message is not None, "no snapshot notification from the worker's database"
    assert int(message["data"]) == version
