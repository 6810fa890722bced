"""SQL every domain shares: a row by primary key, deleting one, listing filters and
pages, and the stored response of an Idempotency-Key."""

from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Select, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from control.models import IdempotencyRecord

T = TypeVar("T")


def get_row(session: Session, model: type[T], ident: Any) -> T | None:
    return session.get(model, ident)


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


def oldest_first(
    session: Session,
    query: Select[T],
    id_column: InstrumentedAttribute[int],
    *,
    cursor: str | None,
    limit: int,
) -> list[T]:
    """Up to `limit + 1` rows after the cursor in id order (the extra row says
    whether a next page exists; `control.api.pagination.page_of` drops it)."""
    if cursor:
        query = query.where(id_column > int(cursor))
    return list(session.scalars(query.order_by(id_column).limit(limit + 1)))


def newest_first(
    session: Session,
    query: Select[T],
    id_column: InstrumentedAttribute[int],
    *,
    cursor: str | None,
    limit: int,
) -> list[T]:
    """Up to `limit + 1` rows before the cursor, newest first."""
    if cursor:
        query = query.where(id_column < int(cursor))
    return list(session.scalars(query.order_by(id_column.desc()).limit(limit + 1)))
