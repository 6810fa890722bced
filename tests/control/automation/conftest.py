"""A real Celery worker (in a thread) on the automation app, per broker and database.

Brokers: kombu's SQLAlchemy transport on an SQLite file (the embedded default)
and Redis (`require_redis()`); databases: SQLite and PostgreSQL from
`tests.fixtures.db`. The jobs commit for real, so scenarios use
`committed_database`, which empties every table afterwards.
"""

import uuid
from collections.abc import Iterator

import pytest
from celery.contrib.testing.worker import start_worker
from kombu.transport import sqlalchemy as sql_transport

from control.automation.app import create_celery_app
from control.automation.celery_app import AutomationCelery
from control.settings import ControlSettings
from tests.fixtures.db import ADMIN_TOKEN, INTERNAL_TOKEN
from tests.fixtures.services import require_redis


@pytest.fixture(scope="session", params=["sqlite-broker", "redis-broker"])
def broker_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def automation_app(
    db_url: str, broker_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AutomationCelery]:
    data_dir = tmp_path_factory.mktemp("automation")
    broker: str | None = None
    if broker_kind == "redis-broker":
        broker = require_redis()
    settings = ControlSettings(
        data_dir=data_dir,
        database_url=db_url,
        broker_url=broker,
        result_backend=broker,
        admin_token=ADMIN_TOKEN,
        internal_token=INTERNAL_TOKEN,
    )
    # NOTE: kombu's SQL transport polls every second and forwards transport options
    # to create_engine (so `polling_interval` cannot go there); faster polling only
    # shortens the tests' waits.
    sql_transport.Transport.polling_interval = 0.05
    # NOTE: a queue of its own, so parallel test sessions on the shared Redis never
    # take each other's messages.
    app = create_celery_app(settings, queue=f"specroute-test-{uuid.uuid4().hex[:8]}")
    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING"):
        yield app
    app.database.dispose()
