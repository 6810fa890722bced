"""Change notifications after a commit that bumped the snapshot version.

Gateways poll anyway; a notification only shortens the time a flip takes to
reach them. So publishing is best effort: it runs after the commit (the change
is already durable and visible), and a failure is logged, never raised into
the request that made the change.

Channels: Redis pub/sub `SNAPSHOT_CHANNEL` when a Redis URL is configured, and
PostgreSQL `NOTIFY specroute_snapshot` when the database is PostgreSQL. The
payload is the new version as text.
"""

import logging
import weakref
from typing import Any

from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session, sessionmaker

from control.db import Database
from control.snapshot.version import SNAPSHOT_BUMPED
from specwire import SNAPSHOT_CHANNEL

log = logging.getLogger(__name__)

PG_CHANNEL = "specroute_snapshot"


class SnapshotNotifier:
    """Publishes bumped versions; `install_snapshot_notifier` wires it to a Database."""

    def __init__(self, *, redis_url: str | None, engine: Engine | None) -> None:
        self.redis_url = redis_url
        # Only a PostgreSQL engine gets NOTIFY; others have no LISTEN side.
        self.pg_engine = (
            engine if engine is not None and engine.dialect.name == "postgresql" else None
        )
        self._redis: Any = None
        self.published = 0
        self.failures = 0

    @property
    def enabled(self) -> bool:
        return self.redis_url is not None or self.pg_engine is not None

    def _redis_client(self, url: str) -> Any:
        if self._redis is None:
            import redis

            # NOTE: short timeouts: this runs on the request thread after the commit.
            self._redis = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        return self._redis

    def publish(self, version: int) -> None:
        """Send `version` on every configured channel; never raises."""
        if self.redis_url is not None:
            try:
                self._redis_client(self.redis_url).publish(SNAPSHOT_CHANNEL, str(version))
                self.published += 1
            except Exception as exc:  # best effort by design: see the module docstring
                self.failures += 1
                log.warning("snapshot notification via Redis failed: %s", exc)
        if self.pg_engine is not None:
            try:
                with self.pg_engine.connect() as conn:
                    conn.execute(select(func.pg_notify(PG_CHANNEL, str(version))))
                    conn.commit()
                self.published += 1
            except Exception as exc:
                self.failures += 1
                log.warning("snapshot notification via PostgreSQL NOTIFY failed: %s", exc)

    def after_commit(self, session: Session) -> None:
        version = session.info.pop(SNAPSHOT_BUMPED, None)
        if version is not None:
            self.publish(int(version))

    def after_rollback(self, session: Session) -> None:
        # A rolled-back bump never happened; do not announce it on a later commit.
        session.info.pop(SNAPSHOT_BUMPED, None)

    def close(self) -> None:
        if self._redis is not None:
            self._redis.close()
            self._redis = None


_installed: "weakref.WeakKeyDictionary[Database, SnapshotNotifier]" = weakref.WeakKeyDictionary()


def install_snapshot_notifier(
    database: Database, *, redis_url: str | None, engine: Engine | None = None
) -> SnapshotNotifier:
    """Hook a notifier onto every session `database` makes (idempotent per database).

    `engine` is where NOTIFY is sent; it defaults to the database's own engine.
    """
    existing = _installed.get(database)
    if existing is not None:
        return existing
    notifier = SnapshotNotifier(redis_url=redis_url, engine=engine or database.engine)
    factory: sessionmaker[Session] = database.sessionmaker
    event.listen(factory, "after_commit", notifier.after_commit)
    event.listen(factory, "after_rollback", notifier.after_rollback)
    _installed[database] = notifier
    return notifier


def notifier_for(database: Database) -> SnapshotNotifier | None:
    return _installed.get(database)
