"""SQL for the internal API's pool spec reads."""

from sqlalchemy import Select, select
from sqlalchemy.orm import Session, selectinload

from control.models import PairVersion, Pool


def _pool_with_pair() -> Select[Pool]:
    return select(Pool).options(selectinload(Pool.pair_version).selectinload(PairVersion.pair))


def pool_by_id(session: Session, pool_id: int) -> Pool | None:
    return session.scalar(_pool_with_pair().where(Pool.id == pool_id))


def pool_by_name(session: Session, name: str) -> Pool | None:
    return session.scalar(_pool_with_pair().where(Pool.name == name))
