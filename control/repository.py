"""SQL every domain shares: a row by primary key, deleting one, listing filters and
pages, the compare-and-set on a version, the stored response of an Idempotency-Key,
and `Repository`, the get / list / create of one model."""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import ColumnElement, Select, inspect, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session
from sqlalchemy.orm.interfaces import ORMOption

from control.errors import Missing
from control.models import IdempotencyRecord, utcnow

T = TypeVar("T")
M = TypeVar("M")


def get_row(session: Session, model: type[T], ident: Any) -> T | None:
    return session.get(model, ident)


def add_row(session: Session, row: T) -> T:
    """Add and flush, so the row has its id and its defaults."""
    session.add(row)
    session.flush()
    return row


def delete_row(session: Session, row: object) -> None:
    """Delete and flush, so a foreign-key refusal surfaces here."""
    session.delete(row)
    session.flush()


def idempotency_record(session: Session, actor: str, key: str) -> IdempotencyRecord | None:
    return session.scalar(
        select(IdempotencyRecord).where(
            IdempotencyRecord.actor == actor, IdempotencyRecord.key == key
        )
    )


def equal_to(*pairs: tuple[InstrumentedAttribute[Any], Any]) -> list[ColumnElement[bool]]:
    """`column == value` for each pair whose value is given (not None): the optional
    equality filters of a listing."""
    return [column == value for column, value in pairs if value is not None]


def within(
    column: InstrumentedAttribute[datetime], since: datetime | None, until: datetime | None
) -> list[ColumnElement[bool]]:
    """`since <= column < until`, each bound only when given: a listing's time window."""
    bounds = [] if since is None else [column >= since]
    return bounds if until is None else [*bounds, column < until]


def cursor_page(
    session: Session,
    query: Select[T],
    id_column: ColumnElement[int],
    *,
    cursor: str | None,
    limit: int,
    newest: bool,
) -> list[T]:
    """Up to `limit + 1` rows past the cursor in id order, or newest first (the extra
    row says whether a next page exists; `control.api.pagination.page_of` drops it)."""
    if cursor:
        query = query.where(id_column < int(cursor) if newest else id_column > int(cursor))
    order = id_column.desc() if newest else id_column
    return list(session.scalars(query.order_by(order).limit(limit + 1)))


def compare_and_set(
    session: Session, model: type[Any], ident: int, expected_version: int, values: Mapping[str, Any]
) -> bool:
    """UPDATE … SET …, version = version + 1 WHERE id = :id AND version = :expected;
    False on a lost race.

    The row lock taken by the UPDATE serialises concurrent writers; the loser
    re-reads the new version, matches no row, and gets False.
    """
    columns = inspect(model).columns
    result = session.execute(
        update(model)
        .where(columns["id"] == ident, columns["version"] == expected_version)
        .values(**values, version=columns["version"] + 1, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


class Repository(Generic[M]):
    """The reads and the insert every admin resource has, for one model keyed by `id`
    (in the spirit of Polar's RepositoryBase): one row or None, one row or the typed
    404 `<entity>_not_found`, one row by name, a cursor page, and create.

    `label` names the entity in the 404's message ("threshold set 7 does not
    exist"); by default the entity with spaces for underscores. `page_options` load
    what a listing shows with each row (a pool's workers)."""

    def __init__(
        self,
        model: type[M],
        entity: str,
        *,
        label: str | None = None,
        page_options: Sequence[ORMOption] = (),
    ) -> None:
        self.model = model
        self.entity = entity
        self.label = label or entity.replace("_", " ")
        self.page_options = tuple(page_options)

    def get(self, session: Session, ident: int) -> M | None:
        return session.get(self.model, ident)

    def get_or_raise(self, session: Session, ident: int) -> M:
        """The row, or Missing (404 `<entity>_not_found`)."""
        row = session.get(self.model, ident)
        if row is None:
            raise Missing(self.entity, f"{self.label} {ident} does not exist")
        return row

    def one_or_none(self, session: Session, *where: ColumnElement[bool]) -> M | None:
        return session.scalar(select(self.model).where(*where))

    def by_name(self, session: Session, name: str) -> M | None:
        return session.scalar(select(self.model).filter_by(name=name))

    def page(
        self,
        session: Session,
        *where: ColumnElement[bool],
        cursor: str | None,
        limit: int,
        newest: bool = False,
        **equal: Any,
    ) -> list[M]:
        """Up to `limit + 1` rows past the cursor in id order (newest first when
        `newest`), matching `where` and `column=value` for each `equal` value given
        (not None): a listing's optional filters."""
        given = {column: value for column, value in equal.items() if value is not None}
        base = select(self.model).options(*self.page_options).where(*where).filter_by(**given)
        ids = inspect(self.model).columns["id"]
        return cursor_page(session, base, ids, cursor=cursor, limit=limit, newest=newest)

    def create(self, session: Session, row: M) -> M:
        """Add and flush, so the row has its id and its defaults."""
        return add_row(session, row)
