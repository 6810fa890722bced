"""ETag / If-Match helpers for versioned resources (rollouts, segments)."""

import re

from fastapi import Header, Response

from control.errors import InvalidRequest, PreconditionRequired

_VERSION = re.compile(r"[0-9]{1,18}", re.ASCII)


def etag(version: int) -> str:
    return f'"{version}"'


def set_etag(response: Response, version: int) -> None:
    response.headers["ETag"] = etag(version)


def parse_if_match(value: str | None) -> int | None:
    """The version an If-Match names; None when absent or `*` (any version)."""
    if value is None or value.strip() == "*":
        return None
    raw = value.strip()
    if raw.startswith("W/"):
        raw = raw[2:]
    raw = raw.strip('"')
    # NOTE: ASCII digits only and at most 18 (a version fits in 64 bits): str.isdigit
    # accepts "²" and "١٢", which int() then refuses or reads as a foreign number.
    if _VERSION.fullmatch(raw) is None:
        raise InvalidRequest(
            'If-Match must be an ETag returned by this API, e.g. "3"',
            details={"param": "If-Match"},
        )
    return int(raw)


def if_match(
    if_match: str | None = Header(
        default=None,
        alias="If-Match",
        description="The ETag last read; a stale one is rejected with 412.",
    ),
) -> int | None:
    return parse_if_match(if_match)


def required_if_match(
    if_match: str | None = Header(
        default=None,
        alias="If-Match",
        description="The ETag last read (required); a stale one is rejected with 412.",
    ),
) -> int:
    version = parse_if_match(if_match)
    if version is None:
        raise PreconditionRequired("this update needs an If-Match header with the current ETag")
    return version
