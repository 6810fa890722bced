"""Engine and session handling: one session per unit of work, commit on success."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    # NOTE: WAL lets readers (snapshot polls) proceed while a writer commits.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def make_engine(
    url: str,
    *,
    lock_timeout_ms: int | None = None,
    statement_timeout_ms: int | None = None,
    **kwargs: Any,
) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False}, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if url.startswith("postgresql") and (lock_timeout_ms or statement_timeout_ms):
        # NOTE: per connection, so a lock held elsewhere (a migration, a stuck
        # transaction) ends a request's wait with an error the API renders as 503 +
        # Retry-After, instead of holding the request (and a pooled connection).
        options = []
        if lock_timeout_ms:
            options.append(f"-c lock_timeout={int(lock_timeout_ms)}")
        if statement_timeout_ms:
            options.append(f"-c statement_timeout={int(statement_timeout_ms)}")
        kwargs["connect_args"] = {**kwargs.get("connect_args", {}), "options": " ".join(options)}
    return create_engine(url, pool_pre_ping=True, **kwargs)


class Database:
    def __init__(self, url: str, **engine_kwargs: Any) -> None:
        self.url = url
        self.engine = make_engine(url, **engine_kwargs)
        self.sessionmaker = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """Commit when the block succeeds, roll back when it raises."""
        session = self.sessionmaker()
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def dispose(self) -> None:
        self.engine.dispose()
