"""SQL every domain shares: a row by primary key, and deleting one."""

from typing import Any, TypeVar

from sqlalchemy.orm import Session

T = TypeVar("T")


def get_row(session: Session, model: type[T], ident: Any) -> T | None:
    return session.get(model, ident)


def delete_row(session: Session, row: object) -> None:
    """Delete and flush, so a foreign-key refusal surfaces here."""
    session.delete(row)
    session.flush()
