"""SQL for rollouts, including the compare-and-set every flip goes through."""

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from control.models import Rollout, utcnow
from control.repository import equal_to, oldest_first


def page_rollouts(
    session: Session,
    *,
    name: str | None,
    state: str | None,
    segment_id: int | None,
    cursor: str | None,
    limit: int,
) -> list[Rollout]:
    query = select(Rollout).where(
        *equal_to((Rollout.name, name), (Rollout.state, state), (Rollout.segment_id, segment_id))
    )
    return oldest_first(session, query, Rollout.id, cursor=cursor, limit=limit)


def get_rollout(session: Session, rollout_id: int) -> Rollout | None:
    return session.get(Rollout, rollout_id)


def rollout_by_name(session: Session, name: str) -> Rollout | None:
    return session.scalar(select(Rollout).where(Rollout.name == name))


def open_rollouts_of_segment(session: Session, segment_id: int) -> list[str]:
    return list(
        session.scalars(
            select(Rollout.name).where(
                Rollout.segment_id == segment_id, Rollout.state != "rolled_back"
            )
        )
    )


def compare_and_set(
    session: Session, rollout_id: int, expected_version: int, values: dict[str, Any]
) -> bool:
    """UPDATE rollouts SET …, version = version + 1 WHERE id = :id AND version = :expected.

    The row lock taken by the UPDATE serialises concurrent writers; the loser
    re-reads the new version, matches no row, and gets False.
    """
    result = session.execute(
        update(Rollout)
        .where(Rollout.id == rollout_id, Rollout.version == expected_version)
        .values(**values, version=Rollout.version + 1, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]
