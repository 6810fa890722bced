"""SQL for segments (reads, create and the compare-and-set through `SEGMENTS`)."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import Rollout, Segment
from control.repository import Repository

SEGMENTS = Repository(Segment, "segment")


def rollouts_of(session: Session, segment_id: int) -> list[str]:
    return list(session.scalars(select(Rollout.name).where(Rollout.segment_id == segment_id)))
