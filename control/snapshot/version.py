"""The snapshot version counter. Any change that affects the compiled snapshot calls
`bump_snapshot_version` inside its own transaction, so the new version becomes
visible exactly when the change does."""

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from control.models import SnapshotState, utcnow

SNAPSHOT_BUMPED = "specroute.snapshot_bumped"


def current_snapshot_version(session: Session) -> int:
    version = session.scalar(select(SnapshotState.version).where(SnapshotState.id == 1))
    return int(version or 0)


def _increment(session: Session) -> int | None:
    result = session.execute(
        update(SnapshotState)
        .where(SnapshotState.id == 1)
        .values(version=SnapshotState.version + 1, updated_at=utcnow())
        .returning(SnapshotState.version)
    )
    return result.scalar_one_or_none()


def bump_snapshot_version(session: Session) -> int:
    """Increment atomically (UPDATE … SET version = version + 1) and flag the session
    so the notifier publishes after commit."""
    version = _increment(session)
    if version is None:
        # NOTE: the first write on a fresh database creates the row. Concurrent first
        # writes all get here; a plain INSERT made all but one fail with 409 on the
        # primary key. INSERT … ON CONFLICT DO NOTHING waits for the winner's commit
        # (PostgreSQL) and then does nothing, and the UPDATE counts on its row.
        insert = (
            postgresql_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
        )
        session.execute(
            insert(SnapshotState)
            .values(id=1, version=0, updated_at=utcnow())
            .on_conflict_do_nothing(index_elements=[SnapshotState.id])
        )
        version = _increment(session)
        assert version is not None
    session.info[SNAPSHOT_BUMPED] = int(version)
    return int(version)
