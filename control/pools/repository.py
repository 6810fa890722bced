"""SQL for pools (reads and create through `POOLS`)."""

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, selectinload

from control.models import Pool, Rollout
from control.repository import Repository

POOLS = Repository(Pool, "pool", page_options=[selectinload(Pool.workers)])


def rollouts_using(session: Session, pool_id: int) -> list[str]:
    return list(
        session.scalars(
            select(Rollout.name).where(
                or_(Rollout.spec_pool_id == pool_id, Rollout.baseline_pool_id == pool_id)
            )
        )
    )


def live_rollouts_using(session: Session, pool_id: int) -> list[Rollout]:
    """Rollouts on either arm of the pool that are not rolled back."""
    return list(
        session.scalars(
            select(Rollout).where(
                or_(Rollout.spec_pool_id == pool_id, Rollout.baseline_pool_id == pool_id),
                Rollout.state != "rolled_back",
            )
        )
    )
