"""SQL for threshold sets (reads and create through `SETS`)."""

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.models import ThresholdSet
from control.repository import Repository

# NOTE: a threshold set's `version` is its number within the name: a change inserts
# version n+1, the row itself is never updated.
SETS = Repository(ThresholdSet, "threshold_set")


def latest_version(session: Session, name: str) -> int:
    return int(
        session.scalar(select(func.max(ThresholdSet.version)).where(ThresholdSet.name == name)) or 0
    )
