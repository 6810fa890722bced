"""ETag / If-None-Match / If-Match for versioned resources (pairs, pools, segments,
tenants, rollouts): a GET sends `ETag: "<version>"` and answers a matching
If-None-Match with 304; PATCH and DELETE need If-Match (428 without, 412 stale).

A resource whose representation embeds live children (a pool's workers, a pair's
versions) sends `"<version>.<digest of the children>"`, so a cached copy is never
answered 304 after a heartbeat; If-Match compares only the version, so a heartbeat
never makes an admin's update stale.
"""

import hashlib
import json
import re
from typing import Any

from fastapi import Header, Request, Response
from fastapi.encoders import jsonable_encoder

from control.errors import InvalidRequest, PreconditionRequired

_VERSION = re.compile(r"([0-9]{1,18})(\.[0-9a-f]{1,32})?", re.ASCII)


def etag(version: int, live: Any = None) -> str:
    if live is None:
        return f'"{version}"'
    encoded = json.dumps(jsonable_encoder(live), sort_keys=True, separators=(",", ":"))
    return f'"{version}.{hashlib.sha256(encoded.encode()).hexdigest()[:12]}"'


def set_etag(response: Response, version: int, live: Any = None) -> None:
    response.headers["ETag"] = etag(version, live)


def not_modified(
    request: Request, response: Response, version: int, live: Any = None
) -> Response | None:
    """Sets the ETag; returns the 304 to send when If-None-Match names it (or is
    `*`), else None and the route answers its 200."""
    tag = etag(version, live)
    response.headers["ETag"] = tag
    header = request.headers.get("If-None-Match")
    if header is None:
        return None
    seen = {t.strip().removeprefix("W/") for t in header.split(",")}
    if "*" in seen or tag in seen:
        return Response(status_code=304, headers={"ETag": tag})
    return None


NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not modified: If-None-Match names the current ETag."}
}


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
    match = _VERSION.fullmatch(raw)
    if match is None:
        raise InvalidRequest(
            'If-Match must be an ETag returned by this API, e.g. "3"',
            details={"param": "If-Match"},
        )
    return int(match.group(1))


def if_match(
    if_match: str | None = Header(
        default=None,
        alias="If-Match",
        description="The ETag last read; a stale one is rejected with 412.",
    ),
) -> int | None:
    return parse_if_match(if_match)


def _missing() -> PreconditionRequired:
    return PreconditionRequired(
        "this change needs an If-Match header with the current ETag (GET it first)",
        details={"param": "If-Match"},
    )


def required_if_match(
    if_match: str | None = Header(
        default=None,
        alias="If-Match",
        description="The ETag last read (required); a stale one is rejected with 412.",
    ),
) -> int:
    """For compare-and-set updates: an ETag, not `*`."""
    version = parse_if_match(if_match)
    if version is None:
        raise _missing()
    return version


def required_if_match_or_any(
    if_match: str | None = Header(
        default=None,
        alias="If-Match",
        description=(
            "The ETag last read (required; `*` for any version); a stale one is rejected with 412."
        ),
    ),
) -> int | None:
    """An ETag's version, or None for `*` (a deliberate unconditional change)."""
    if if_match is None:
        raise _missing()
    return parse_if_match(if_match)
