"""SQL for pools."""

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, selectinload

from control.models import Pool, Rollout
from control.repository import equal_to, oldest_first


def page_pools(
    session: Session,
    *,
    name: str | None,
    served_model_name: str | None,
    cursor: str | None,
    limit: int,
) -> list[Pool]:
    query = (
        select(Pool)
        .options(selectinload(Pool.workers))
        .where(*equal_to((Pool.name, name), (Pool.served_model_name, served_model_name)))
    )
    return oldest_first(session, query, Pool.id, cursor=cursor, limit=limit)


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
