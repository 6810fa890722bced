"""The snapshot version counter. Any change that affects the compiled snapshot calls
`bump_snapshot_version` inside its own transaction, so the new version becomes
visible exactly when the change does."""

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from control.models import SnapshotState, utcnow

SNAPSHOT_BUMPED = "specroute.snapshot_bumped"


def current_snapshot_version(session: Session) -> int:
    version = session.scalar(select(SnapshotState.version).where(SnapshotState.id == 1))
    return int(version or 0)


def bump_snapshot_version(session: Session) -> int:
    """Increment atomically (UPDATE … SET version = version + 1) and flag the session
    so the notifier publishes after commit."""
    result = session.execute(
        update(SnapshotState)
        .where(SnapshotState.id == 1)
        .values(version=SnapshotState.version + 1, updated_at=utcnow())
        .returning(SnapshotState.version)
    )
    version = result.scalar_one_or_none()
    if version is None:
        session.add(SnapshotState(id=1, version=1))
        session.flush()
        version = 1
    session.info[SNAPSHOT_BUMPED] = int(version)
    return int(version)
