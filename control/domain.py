"""The skeleton every admin domain's service shares: errors named after their
entity, get-or-raise, the tail of every mutation (audit + snapshot bump), and
`Change`, the version-checked, audited update or delete of one row."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

from sqlalchemy import inspect
from sqlalchemy.orm import Session

from control import repository
from control.audit.service import record_audit
from control.errors import Conflict, Missing, stale_version
from control.snapshot.version import bump_snapshot_version

T = TypeVar("T")


class Row(Protocol):
    @property
    def id(self) -> int: ...


class Versioned(Protocol):
    """A row with the version its ETag carries."""

    @property
    def id(self) -> int: ...

    @property
    def version(self) -> int: ...


R = TypeVar("R", bound=Row)
V = TypeVar("V", bound=Versioned)
# NOTE: unbounded: mypy checks a class's type argument against a protocol on the
# model's class attributes (Mapped[int]), not on its instances (int), and refuses
# every model; `Change.start` takes a Versioned row instead.
M = TypeVar("M")

__all__ = [
    "Change",
    "InUse",
    "Missing",
    "NameTaken",
    "Versioned",
    "check_version",
    "create_recorded",
    "found",
    "record_change",
]


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


def check_version(row: Versioned, entity: str, expected_version: int | None) -> None:
    """PreconditionFailed (412) when an If-Match named another version than the row's;
    None (no If-Match, or `*`) passes."""
    if expected_version is not None and row.version != expected_version:
        raise stale_version(entity, row.id, row.version, expected_version)


def create_recorded(
    session: Session,
    row: R,
    *,
    entity: str,
    state: Callable[[R], dict[str, Any]],
    actor: str,
    action: str | None = None,
    before: dict[str, Any] | None = None,
) -> R:
    """Insert `row` (flushed: it has its id and defaults), audit it as
    `<entity>.create` (or `action`) with `state(row)` after, and bump the snapshot."""
    repository.add_row(session, row)
    record_change(
        session,
        actor=actor,
        action=action or f"{entity}.create",
        entity_type=entity,
        entity_id=row.id,
        before=before,
        after=state(row),
    )
    return row


@dataclass
class Change(Generic[M]):
    """One audited change of a versioned row, in the order every admin mutation has:
    `start` checks the If-Match version and keeps the state before; the caller checks
    what its domain refuses; `apply` sets the values and bumps the version; `record`
    audits before and after and bumps the snapshot (`save` is both); `delete` removes
    the row and audits it.

    Rows whose mapper keeps the version (`version_id_col`: pairs, pools, tenants) are
    set and flushed; the flush's `UPDATE … WHERE version = :read` is their
    compare-and-set (a lost race is StaleDataError, a 412 in control.api.handlers).
    The others (segments, rollouts) get the explicit compare-and-set of
    `control.repository.compare_and_set`; a lost race is a 412 naming the version
    that won."""

    session: Session
    row: M
    ident: int
    entity: str
    state: Callable[[M], dict[str, Any]]
    before: dict[str, Any]
    read_version: int

    @staticmethod
    def start(
        session: Session,
        row: V,
        *,
        entity: str,
        state: Callable[[V], dict[str, Any]],
        expected_version: int | None,
    ) -> "Change[V]":
        check_version(row, entity, expected_version)
        return Change(session, row, row.id, entity, state, state(row), row.version)

    @staticmethod
    def load(
        session: Session,
        rows: "repository.Repository[V]",
        ident: int,
        *,
        state: Callable[[V], dict[str, Any]],
        expected_version: int | None,
    ) -> "Change[V]":
        """`start` on the row `ident` of `rows`, or its 404."""
        row = rows.get_or_raise(session, ident)
        return Change.start(
            session, row, entity=rows.entity, state=state, expected_version=expected_version
        )

    def apply(self, values: Mapping[str, Any]) -> M:
        row, session = self.row, self.session
        if inspect(type(row)).version_id_col is not None:
            for name, value in values.items():
                setattr(row, name, value)
            session.flush()
            return row
        if not repository.compare_and_set(
            session, type(row), self.ident, self.read_version, values
        ):
            session.refresh(row)
            current = cast(Versioned, row).version
            raise stale_version(self.entity, self.ident, current, self.read_version)
        session.refresh(row)
        return row

    def record(self, *, actor: str, action: str | None = None, reason: str | None = None) -> M:
        """Audit `<entity>.update` (or `action`) with the state before and now."""
        record_change(
            self.session,
            actor=actor,
            action=action or f"{self.entity}.update",
            entity_type=self.entity,
            entity_id=self.ident,
            before=self.before,
            after=self.state(self.row),
            reason=reason,
        )
        return self.row

    def save(self, values: Mapping[str, Any], *, actor: str) -> M:
        self.apply(values)
        return self.record(actor=actor)

    def delete(self, *, actor: str, after: dict[str, Any] | None = None) -> None:
        """Delete the row (flushed, so a foreign-key refusal surfaces here) and audit
        `<entity>.delete` with the state before."""
        repository.delete_row(self.session, self.row)
        record_change(
            self.session,
            actor=actor,
            action=f"{self.entity}.delete",
            entity_type=self.entity,
            entity_id=self.ident,
            before=self.before,
            after=after,
        )
