"""SQL for rollouts (reads, create and the compare-and-set every flip goes through,
via `ROLLOUTS` and control.repository)."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import Rollout
from control.repository import Repository

ROLLOUTS = Repository(Rollout, "rollout")


def open_rollouts_of_segment(session: Session, segment_id: int) -> list[str]:
    return list(
        session.scalars(
            select(Rollout.name).where(
                Rollout.segment_id == segment_id, Rollout.state != "rolled_back"
            )
        )
    )
