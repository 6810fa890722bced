"""SQL for threshold sets."""

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.models import ThresholdSet
from control.repository import equal_to, oldest_first


def page_sets(
    session: Session, *, name: str | None, cursor: str | None, limit: int
) -> list[ThresholdSet]:
    query = select(ThresholdSet).where(*equal_to((ThresholdSet.name, name)))
    return oldest_first(session, query, ThresholdSet.id, cursor=cursor, limit=limit)


def get_set(session: Session, set_id: int) -> ThresholdSet | None:
    return session.get(ThresholdSet, set_id)


def latest_version(session: Session, name: str) -> int:
    return int(
        session.scalar(select(func.max(ThresholdSet.version)).where(ThresholdSet.name == name)) or 0
    )
