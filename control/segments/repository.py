"""SQL for segments, including the compare-and-set update."""

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from control.models import Rollout, Segment, utcnow
from control.repository import equal_to, oldest_first


def page_segments(
    session: Session, *, name: str | None, cursor: str | None, limit: int
) -> list[Segment]:
    query = select(Segment).where(*equal_to((Segment.name, name)))
    return oldest_first(session, query, Segment.id, cursor=cursor, limit=limit)


def get_segment(session: Session, segment_id: int) -> Segment | None:
    return session.get(Segment, segment_id)


def segment_by_name(session: Session, name: str) -> Segment | None:
    return session.scalar(select(Segment).where(Segment.name == name))


def compare_and_set(
    session: Session, segment_id: int, expected_version: int, values: dict[str, Any]
) -> bool:
    """UPDATE … SET version = version + 1 WHERE version = :expected; False on a lost race."""
    result = session.execute(
        update(Segment)
        .where(Segment.id == segment_id, Segment.version == expected_version)
        .values(**values, version=Segment.version + 1, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def rollouts_of(session: Session, segment_id: int) -> list[str]:
    return list(session.scalars(select(Rollout.name).where(Rollout.segment_id == segment_id)))
