"""Cursor pagination for append-only listings (audit, decisions): newest first,
the cursor is the last id seen, so concurrent inserts never shift a page."""

from typing import Annotated, Generic, TypeVar

from fastapi import Query
from pydantic import BaseModel, Field

T = TypeVar("T")

Limit = Annotated[int, Query(ge=1, le=500, description="Page size.")]
Cursor = Annotated[
    str | None,
    Query(max_length=20, pattern=r"^[0-9]+$", description="`next_cursor` of the previous page."),
]


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null at end.")


def cursor_id(cursor: str | None) -> int | None:
    return int(cursor) if cursor else None
