"""The skeleton every admin domain's service shares: errors named after their
entity, get-or-raise, and the tail of every mutation (audit + snapshot bump)."""

from typing import Any, TypeVar

from sqlalchemy.orm import Session

from control.audit.service import record_audit
from control.errors import Conflict, NotFound
from control.snapshot.version import bump_snapshot_version

T = TypeVar("T")


class Missing(NotFound):
    """404 with code `<entity>_not_found`."""

    def __init__(self, entity: str, message: str) -> None:
        super().__init__(message, code=f"{entity}_not_found")


class NameTaken(Conflict):
    """409 with code `<entity>_name_taken`: names are unique per entity."""

    def __init__(self, entity: str, message: str) -> None:
        super().__init__(message, code=f"{entity}_name_taken", details={"param": "name"})


class InUse(Conflict):
    """409 with code `<entity>_in_use`, naming the rollouts that hold the entity."""

    def __init__(self, entity: str, message: str, rollouts: list[str]) -> None:
        super().__init__(message, code=f"{entity}_in_use", details={"rollouts": rollouts})


def found(row: T | None, entity: str, message: str) -> T:
    """The row, or Missing(entity, message)."""
    if row is None:
        raise Missing(entity, message)
    return row


def record_change(
    session: Session,
    *,
    actor: str,
    action: str,
    entity_type: str,
    entity_id: str | int,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    reason: str | None = None,
) -> None:
    """Every admin mutation's tail: audit it and bump the snapshot version, so
    gateways pick the change up on their next poll."""
    record_audit(
        session,
        actor=actor,
        action=action,
        entity_type=entity_type,
        entity_id=entity_id,
        before=before,
        after=after,
        reason=reason,
    )
    bump_snapshot_version(session)
