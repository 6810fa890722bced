"""SQL for threshold sets."""

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.models import ThresholdSet


def list_sets(session: Session, name: str | None) -> list[ThresholdSet]:
    query = select(ThresholdSet).order_by(ThresholdSet.name, ThresholdSet.version)
    if name is not None:
        query = query.where(ThresholdSet.name == name)
    return list(session.scalars(query))


def get_set(session: Session, set_id: int) -> ThresholdSet | None:
    return session.get(ThresholdSet, set_id)


def latest_version(session: Session, name: str) -> int:
    return int(
        session.scalar(select(func.max(ThresholdSet.version)).where(ThresholdSet.name == name)) or 0
    )
