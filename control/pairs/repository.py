"""SQL for pairs and pair versions (reads and create through `PAIRS` and
`PAIR_VERSIONS`)."""

from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from control.models import DepthRecommendation, Pair, PairVersion, Rollout
from control.repository import Repository
from specwire import EXPOSING_STATES

PAIRS = Repository(Pair, "pair", page_options=[selectinload(Pair.versions)])
# NOTE: a pair version's `version` is its number within the pair, not an ETag: it is
# never compare-and-set (control.domain.Change is for pairs, not their versions).
PAIR_VERSIONS = Repository(PairVersion, "pair_version")


def get_version(session: Session, pair_id: int, version_id: int) -> PairVersion | None:
    return PAIR_VERSIONS.one_or_none(
        session, PairVersion.pair_id == pair_id, PairVersion.id == version_id
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
