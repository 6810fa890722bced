"""SQL for segments (reads, create and the compare-and-set through `SEGMENTS`)."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import Rollout, Segment
from control.repository import Repository, equal_to

SEGMENTS = Repository(Segment, "segment")


def page_segments(
    session: Session, *, name: str | None, cursor: str | None, limit: int
) -> list[Segment]:
    return SEGMENTS.page(session, *equal_to((Segment.name, name)), cursor=cursor, limit=limit)


def rollouts_of(session: Session, segment_id: int) -> list[str]:
    return list(session.scalars(select(Rollout.name).where(Rollout.segment_id == segment_id)))
