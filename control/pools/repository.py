"""SQL for pools."""

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, selectinload

from control.models import Pool, Rollout


def list_pools(session: Session) -> list[Pool]:
    return list(session.scalars(select(Pool).options(selectinload(Pool.workers)).order_by(Pool.id)))


def get_pool(session: Session, pool_id: int) -> Pool | None:
    return session.get(Pool, pool_id)


def pool_by_name(session: Session, name: str) -> Pool | None:
    return session.scalar(select(Pool).where(Pool.name == name))


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
