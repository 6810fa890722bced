"""SQL for decisions."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import Decision
from control.repository import equal_to


def list_decisions(
    session: Session,
    *,
    rollout_id: int | None,
    kind: str | None,
    actor: str | None,
    task_id: str | None,
    before_id: int | None,
    limit: int,
) -> list[Decision]:
    # NOTE: limit + 1 rows: the extra one says whether a next page exists
    # (control.api.pagination.page_of drops it).
    query = select(Decision).order_by(Decision.id.desc()).limit(limit + 1)
    query = query.where(
        *equal_to(
            (Decision.rollout_id, rollout_id),
            (Decision.kind, kind),
            (Decision.actor, actor),
            (Decision.task_id, task_id),
        )
    )
    if before_id is not None:
        query = query.where(Decision.id < before_id)
    return list(session.scalars(query))


def get_decision(session: Session, decision_id: int) -> Decision | None:
    return session.get(Decision, decision_id)
