"""Values a careless or hostile caller sends where a field expects something else."""

from typing import Any


def nested(depth: int) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    node = doc
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return doc


LONE_SURROGATE = "\ud800"

HOSTILE_VALUES: list[Any] = [
    None,
    True,
    -1,
    0,
    2**63,
    -(2**63) - 1,
    2**200,
    1e308,
    -0.0,
    "",
    " ",
    "x" * 5000,
    "\x00",
    LONE_SURROGATE,
    "١٢٣",
    "²",
    "../../etc/passwd",
    "/",
    "%00",
    "😀",
    [],
    [None],
    [LONE_SURROGATE],
    [1, 2, 3],
    {},
    {"": None},
    {LONE_SURROGATE: 1},
    nested(40),
    [nested(5)],
]

HOSTILE_HEADERS: list[dict[str, bytes]] = [
    {"If-Match": '"١٢"'.encode()},
    {"If-Match": b'"' + b"9" * 5000 + b'"'},
    {"If-Match": 'W/"²"'.encode()},
    {"If-Match": b'"-1"'},
    {"If-Match": b"*"},
    {"If-Match": b'"99999999999999999999"'},
    {"Idempotency-Key": b"k" * 300},
    {"Idempotency-Key": "é".encode("latin-1")},
    {"Content-Type": b"text/plain"},
]

HOSTILE_QUERY: list[str] = [
    "2026-01-01T00:00:00",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-14:00",
    "0001-01-01T00:00:00Z",
    "not-a-time",
    "-1",
    "99999999999999999999999",
    "١٢",
    "\x00",
    "",
]

HOSTILE_IDS: list[str] = ["0", "-1", "99999999999999999999", "١", "abc", "1.5", "%00", "x" * 300]
