"""The control plane's one clock.

Every timestamp control writes or compares (rows, audit, dwell and cool-down,
heartbeat freshness) comes from `now()`. Production reads the wall clock; the
decision scenario suite (bench/decisions) runs the real jobs on a virtual
clock it advances itself, through `use_clock`.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

_source: Callable[[], datetime] | None = None


def now() -> datetime:
    return _source() if _source is not None else datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """`moment` in UTC; one without an offset is read as UTC, not rejected (gateways send
    UTC, and SQLite hands timestamps back without one)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@contextmanager
def use_clock(source: Callable[[], datetime]) -> Iterator[None]:
    """Make `now()` read `source` (timezone-aware UTC) inside the block."""
    global _source
    previous, _source = _source, source
    try:
        yield
    finally:
        _source = previous
