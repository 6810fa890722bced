"""The reads the snapshot compiler needs, each one query with its relations loaded."""

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, selectinload

from control.models import PairVersion, Pool, Rollout, Segment, SnapshotState, Tenant


def read_version_stamp(session: Session) -> tuple[int, datetime | None]:
    """The snapshot version and when it was last bumped (0, None before the first bump)."""
    row = session.execute(
        select(SnapshotState.version, SnapshotState.updated_at).where(SnapshotState.id == 1)
    ).first()
    return (int(row[0]), row[1]) if row is not None else (0, None)


def load_segments(session: Session) -> Sequence[Segment]:
    return session.scalars(select(Segment).order_by(Segment.id)).all()


def load_rollouts(session: Session) -> Sequence[Rollout]:
    return session.scalars(
        select(Rollout).options(selectinload(Rollout.threshold_set)).order_by(Rollout.id)
    ).all()


def load_pools(session: Session) -> Sequence[Pool]:
    return session.scalars(select(Pool).options(selectinload(Pool.workers)).order_by(Pool.id)).all()


def load_pair_versions(session: Session, referenced: set[int]) -> Sequence[PairVersion]:
    """Active versions, plus retired ones a pool or rollout still points at."""
    condition = PairVersion.status == "active"
    if referenced:
        condition = or_(condition, PairVersion.id.in_(referenced))
    return session.scalars(
        select(PairVersion)
        .where(condition)
        .options(selectinload(PairVersion.pair))
        .order_by(PairVersion.id)
    ).all()


def load_tenants(session: Session) -> Sequence[Tenant]:
    return session.scalars(
        select(Tenant).options(selectinload(Tenant.keys)).order_by(Tenant.id)
    ).all()
