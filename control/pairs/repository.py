"""SQL for pairs and pair versions."""

from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from control.contract import EXPOSING_STATES
from control.models import DepthRecommendation, Pair, PairVersion, Rollout
from control.repository import equal_to, oldest_first


def page_pairs(session: Session, *, name: str | None, cursor: str | None, limit: int) -> list[Pair]:
    query = select(Pair).options(selectinload(Pair.versions)).where(*equal_to((Pair.name, name)))
    return oldest_first(session, query, Pair.id, cursor=cursor, limit=limit)


def page_versions(
    session: Session, pair_id: int, *, status: str | None, cursor: str | None, limit: int
) -> list[PairVersion]:
    query = select(PairVersion).where(
        PairVersion.pair_id == pair_id, *equal_to((PairVersion.status, status))
    )
    return oldest_first(session, query, PairVersion.id, cursor=cursor, limit=limit)


def get_pair(session: Session, pair_id: int) -> Pair | None:
    return session.get(Pair, pair_id)


def pair_by_name(session: Session, name: str) -> Pair | None:
    return session.scalar(select(Pair).where(Pair.name == name))


def get_version(session: Session, pair_id: int, version_id: int) -> PairVersion | None:
    return session.scalar(
        select(PairVersion).where(PairVersion.pair_id == pair_id, PairVersion.id == version_id)
    )


def next_version_number(session: Session, pair_id: int) -> int:
    current = session.scalar(
        select(func.max(PairVersion.version)).where(PairVersion.pair_id == pair_id)
    )
    return int(current or 0) + 1


def exposing_rollout_names(session: Session, pair_version_id: int) -> list[str]:
    return list(
        session.scalars(
            select(Rollout.name).where(
                Rollout.pair_version_id == pair_version_id,
                Rollout.state.in_([s.value for s in EXPOSING_STATES]),
            )
        )
    )


def latest_depth_advice(session: Session, pair_version_id: int) -> DepthRecommendation | None:
    return session.scalar(
        select(DepthRecommendation)
        .where(DepthRecommendation.pair_version_id == pair_version_id)
        .order_by(DepthRecommendation.id.desc())
        .limit(1)
    )
