"""Cursor pagination, the same on every admin listing: `limit` (1–500, default 50),
`cursor` (the previous page's `next_cursor`) and the route's filters; the answer is
`{"items": [...], "next_cursor": "…" | null}`.

The cursor is the last id seen, so concurrent inserts never shift a page; the
repositories fetch `limit + 1` rows (`control.repository.cursor_page`, through
`Repository.page`) so `next_cursor` is null exactly on the last page.
Append-only logs (decisions, audit, requests, evaluations) list newest first;
configuration resources (pairs, pools, segments, ...) oldest first.
"""

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Generic, Protocol, TypeVar

from fastapi import Query
from pydantic import BaseModel, Field

T = TypeVar("T")
R = TypeVar("R", bound="HasId")

Limit = Annotated[int, Query(ge=1, le=500, description="Page size.")]
Cursor = Annotated[
    str | None,
    Query(max_length=20, pattern=r"^[0-9]+$", description="`next_cursor` of the previous page."),
]


class HasId(Protocol):
    id: Any


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null at end.")


def page_of(rows: Sequence[R], limit: int, build: Callable[[R], T]) -> Page[T]:
    """The page of `rows` fetched with `limit + 1`: `next_cursor` only when more exist."""
    shown = rows[:limit]
    more = len(rows) > limit
    return Page[T](
        items=[build(row) for row in shown],
        next_cursor=str(shown[-1].id) if more and shown else None,
    )
