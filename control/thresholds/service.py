"""Threshold sets are never edited: a change writes version n+1 of the same name,
so every decision can cite exactly the thresholds it used."""

from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from control.domain import NameTaken, found, record_change
from control.errors import InvalidRequest
from control.models import ThresholdSet
from control.thresholds import repository as repo
from control.thresholds.schemas import ThresholdSetChange, ThresholdSetCreate, ThresholdValues


def _values(row: ThresholdSet) -> dict[str, Any]:
    return {name: getattr(row, name) for name in ThresholdValues.model_fields}


def _locations(exc: ValidationError) -> list[str]:
    return [".".join(str(p) for p in e["loc"]) or "body" for e in exc.errors()]


def get_set(session: Session, set_id: int) -> ThresholdSet:
    return found(
        repo.get_set(session, set_id), "threshold_set", f"threshold set {set_id} does not exist"
    )


def create_set(session: Session, body: ThresholdSetCreate, *, actor: str) -> ThresholdSet:
    if repo.latest_version(session, body.name) > 0:
        raise NameTaken(
            "threshold_set", f"threshold set {body.name!r} exists; change it to make a new version"
        )
    row = ThresholdSet(name=body.name, version=1, **body.model_dump(exclude={"name"}))
    session.add(row)
    session.flush()
    record_change(
        session,
        actor=actor,
        action="threshold_set.create",
        entity_type="threshold_set",
        entity_id=row.id,
        after={"name": row.name, "version": 1, **_values(row)},
    )
    return row


def change_set(
    session: Session, set_id: int, body: ThresholdSetChange, *, actor: str
) -> ThresholdSet:
    """New version from `set_id`'s values with `body`'s changes. Rollouts keep the
    version they reference until they are pointed at the new one."""
    base = get_set(session, set_id)
    values = {**_values(base), **body.model_dump(exclude_none=True)}
    try:
        ThresholdValues.model_validate(values)
    except ValidationError as exc:
        # The change alone was valid, the merged set is not (e.g. a degenerate
        # acceptance indifference zone): a 422 naming why, not a 500.
        raise InvalidRequest(
            "; ".join(e["msg"] for e in exc.errors()), details={"errors": _locations(exc)}
        ) from exc
    row = ThresholdSet(
        name=base.name, version=repo.latest_version(session, base.name) + 1, **values
    )
    session.add(row)
    session.flush()
    record_change(
        session,
        actor=actor,
        action="threshold_set.version",
        entity_type="threshold_set",
        entity_id=row.id,
        before={"id": base.id, "version": base.version, **_values(base)},
        after={"id": row.id, "version": row.version, **values},
    )
    return row
