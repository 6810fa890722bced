"""SQL every domain shares: a row by primary key, deleting one, and the stored
response of an Idempotency-Key."""

from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

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
