"""Threshold sets are never edited: a change writes version n+1 of the same name,
so every decision can cite exactly the thresholds it used."""

from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from control.domain import NameTaken, create_recorded
from control.errors import InvalidRequest
from control.models import ThresholdSet
from control.thresholds import repository as repo
from control.thresholds.schemas import ThresholdSetChange, ThresholdSetCreate, ThresholdValues


def _values(row: ThresholdSet) -> dict[str, Any]:
    return {name: getattr(row, name) for name in ThresholdValues.model_fields}


def _locations(exc: ValidationError) -> list[str]:
    return [".".join(str(p) for p in e["loc"]) or "body" for e in exc.errors()]


def _state(row: ThresholdSet) -> dict[str, Any]:
    return {"name": row.name, "version": row.version, **_values(row)}


def get_set(session: Session, set_id: int) -> ThresholdSet:
    return repo.SETS.get_or_raise(session, set_id)


def create_set(session: Session, body: ThresholdSetCreate, *, actor: str) -> ThresholdSet:
    if repo.latest_version(session, body.name) > 0:
        raise NameTaken(
            "threshold_set", f"threshold set {body.name!r} exists; change it to make a new version"
        )
    row = ThresholdSet(name=body.name, version=1, **body.model_dump(exclude={"name"}))
    return create_recorded(session, row, entity="threshold_set", state=_state, actor=actor)


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
    return create_recorded(
        session,
        row,
        entity="threshold_set",
        action="threshold_set.version",
        before={"id": base.id, "version": base.version, **_values(base)},
        state=lambda new: {"id": new.id, "version": new.version, **values},
        actor=actor,
    )
