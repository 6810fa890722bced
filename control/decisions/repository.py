"""SQL for decisions (reads through `DECISIONS`)."""

from sqlalchemy.orm import Session

from control.models import Decision
from control.repository import Repository, equal_to

DECISIONS = Repository(Decision, "decision")


def list_decisions(
    session: Session,
    *,
    rollout_id: int | None,
    kind: str | None,
    actor: str | None,
    task_id: str | None,
    cursor: str | None,
    limit: int,
) -> list[Decision]:
    """Newest first."""
    return DECISIONS.page(
        session,
        *equal_to(
            (Decision.rollout_id, rollout_id),
            (Decision.kind, kind),
            (Decision.actor, actor),
            (Decision.task_id, task_id),
        ),
        cursor=cursor,
        limit=limit,
        newest=True,
    )
