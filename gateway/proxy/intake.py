"""From raw HTTP request to an authenticated tenant and a validated body."""

import asyncio
import json
import os
import re
import zlib
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import Request
from pydantic import ValidationError

from gateway.auth_guard import AuthGuard
from gateway.errors import (
    AuthenticationFailed,
    ClientDisconnected,
    InvalidJSONError,
    PayloadTooLargeError,
    RequestBodyTimeout,
    RequestValidationFailed,
    ServiceUnavailable,
    UnsupportedContentEncoding,
)
from gateway.proxy.schemas import SamplingParams
from gateway.snapshot.store import SnapshotStore
from specwire import TenantSpec
from specwire.auth_throttle import REASON_INVALID, REASON_MISSING
from specwire.logs import REQUEST_ID

Body = TypeVar("Body", bound=SamplingParams)

# Caller-chosen ids are echoed in headers and logs: keep them short and inert.
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


def request_id_of(request: Request) -> str:
    given = request.headers.get("x-request-id")
    rid = given if given is not None and _REQUEST_ID.match(given) else os.urandom(16).hex()
    request.state.request_id = rid
    REQUEST_ID.set(rid)
    return rid


def authenticate(request: Request, store: SnapshotStore, guard: AuthGuard) -> TenantSpec:
    """The key's tenant; 401 for a missing or unknown key, 429 while the caller's
    address has failed too often (checked first, so a flood costs no lookups)."""
    address = request.client.host if request.client is not None else "unknown"
    guard.admit(address)
    if not store.ready:
        raise ServiceUnavailable("The gateway has no policy snapshot yet", code="not_ready")
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        guard.failed(address, REASON_MISSING)
        raise AuthenticationFailed("Missing bearer API key")
    tenant = store.tenant_for_key(key.strip())
    if tenant is None:
        guard.failed(address, REASON_INVALID)
        raise AuthenticationFailed("Incorrect API key provided")
    return tenant


@dataclass(frozen=True, slots=True)
class JSONBody:
    raw: bytes  # the client's bytes: decompressed, and UTF-8 without a BOM
    doc: dict[str, Any]


class BodyDeadlines:
    """The deadline on receiving each request's body, for every read in flight on one
    event loop, kept by a single timer.

    NOTE: an asyncio.timeout per request costs a timer heap push and cancel on every
    read (~3-6 us, /tmp timeit), nearly all for bodies that came with their headers.
    Here a read costs a dict insert and delete: the deadline is the same for all, so
    reads register in deadline order and one timer, armed for the oldest, is enough;
    when it fires it cancels the reads past their deadline and re-arms for the next.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._reads: dict[asyncio.Task[Any], float] = {}  # insertion order = deadline order
        self._expired: set[asyncio.Task[Any]] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the timer's

    def enter(self) -> asyncio.Task[Any]:
        """Start the current task's deadline; it must call leave() when done reading."""
        task = asyncio.current_task()
        assert task is not None
        loop = task.get_loop()
        deadline = loop.time() + self.timeout_s
        self._reads[task] = deadline
        if self._timer is None or self._loop is not loop:
            self._loop, self._timer = loop, loop.call_at(deadline, self._expire, loop)
        return task

    def leave(self, task: asyncio.Task[Any]) -> None:
        self._reads.pop(task, None)
        self._expired.discard(task)

    def expired(self, task: asyncio.Task[Any]) -> bool:
        """Whether the CancelledError `task` meets is its own deadline's (then undone,
        unless something else cancelled it too) rather than anyone else's."""
        if task not in self._expired:
            return False
        self._expired.discard(task)
        return task.uncancel() == 0

    @property
    def reading(self) -> int:
        return len(self._reads)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self._loop:
            return  # a timer of a loop the app no longer serves on (tests)
        self._timer = None
        now = loop.time()
        while self._reads:
            task, deadline = next(iter(self._reads.items()))
            if deadline > now:
                self._timer = loop.call_at(deadline, self._expire, loop)
                return
            del self._reads[task]
            self._expired.add(task)
            task.cancel()


async def read_json(request: Request, max_bytes: int, deadlines: BodyDeadlines) -> JSONBody:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLargeError(f"Request body exceeds {max_bytes} bytes")
    # NOTE: straight from the ASGI receive channel: Starlette's request.stream()
    # wraps it in an async generator, a measurable cost on the time to first token.
    receive = request.receive
    raw = b""
    task = deadlines.enter()
    try:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientDisconnected()
            raw += message.get("body", b"")
            if len(raw) > max_bytes:
                raise PayloadTooLargeError(f"Request body exceeds {max_bytes} bytes")
            if not message.get("more_body", False):
                break
    except asyncio.CancelledError:
        if deadlines.expired(task):
            raise RequestBodyTimeout(deadlines.timeout_s) from None
        raise
    finally:
        deadlines.leave(task)
    encoding = request.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raw = _decompressed(raw, encoding, max_bytes)
    try:
        # NOTE: json.loads(raw, parse_constant=...) would build a JSONDecoder (and its
        # scanner) per call; this is what it does, with one decoder built once.
        charset = json.detect_encoding(raw)
        doc = _DECODER.decode(raw.decode(charset, "surrogatepass"))
    except (ValueError, RecursionError) as exc:
        raise InvalidJSONError("Request body is not valid JSON") from exc
    if not isinstance(doc, dict):
        raise RequestValidationFailed("Request body must be a JSON object", code="invalid_type")
    if charset != "utf-8":
        # A BOM, or UTF-16/32: read as JSON allows (RFC 8259 8.1), but the engine
        # gets UTF-8 without a BOM, which is all it reads.
        raw = json.dumps(doc, separators=(",", ":")).encode()
    return JSONBody(raw, doc)


# zlib window bits per Content-Encoding: gzip framing, or zlib's (HTTP's "deflate").
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


# NOTE: each member costs a new inflater and a copy of the bytes after it: 1 MiB of
# empty 20-byte members (52,422) took 1.0 s of CPU unbounded; 64 members of a 1 MiB
# body copy at most 64 MiB. Real multi-member bodies (appended gzip files) have a few.
MAX_GZIP_MEMBERS = 64


def _decompressed(raw: bytes, encoding: str, max_bytes: int) -> bytes:
    """A compressed body as the JSON it carries. The size limit holds for what it
    decompresses to (inflated at most one byte past it, so a small bomb stays small);
    the engine gets the decompressed bytes, and no Content-Encoding. A gzip body may
    be several members one after another (RFC 1952 2.2), read as their concatenation
    (at most MAX_GZIP_MEMBERS of them)."""
    wbits = _WBITS.get(encoding)
    if wbits is None:
        raise UnsupportedContentEncoding(
            f"Content-Encoding '{encoding[:32]}' is not supported (gzip, deflate or identity)",
            param="content-encoding",
        )
    parts: list[bytes] = []
    size = 0
    rest = raw
    while True:
        inflater = zlib.decompressobj(wbits)
        try:
            part = inflater.decompress(rest, max_bytes + 1 - size)
        except zlib.error as exc:
            raise InvalidJSONError(
                f"Request body is not valid {encoding}", code="invalid_encoding"
            ) from exc
        parts.append(part)
        size += len(part)
        if size > max_bytes:
            raise PayloadTooLargeError(f"Request body exceeds {max_bytes} bytes decompressed")
        rest = inflater.unused_data
        # A zlib stream ("deflate") has no members: nothing may follow it.
        if not inflater.eof or (rest and wbits == zlib.MAX_WBITS):
            raise InvalidJSONError(
                f"Request body is not one complete {encoding} stream", code="invalid_encoding"
            )
        if not rest:
            return b"".join(parts)  # one member: the same bytes, not a copy
        if len(parts) == MAX_GZIP_MEMBERS:
            raise InvalidJSONError(
                f"Request body has more than {MAX_GZIP_MEMBERS} gzip members",
                code="invalid_encoding",
            )


def engine_body(body: JSONBody, *, stream: bool) -> bytes:
    """What the engine gets: the caller's own bytes, asking for usage when streaming.

    Streamed answers must carry usage (tokens and speculative metrics ride on the
    final chunk). Forwarding the client's bytes unchanged where possible skips a
    re-encoding on the time to first token, and cannot alter a value in transit.
    """
    doc = body.doc
    if not stream:
        return body.raw
    options = doc.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        return body.raw
    stripped = body.raw.rstrip()
    if "stream_options" not in doc and stripped.lstrip()[:1] == b"{" and stripped[-1:] == b"}":
        # A UTF-8 JSON object without the key: append it before the closing brace.
        return stripped[:-1] + b',"stream_options":{"include_usage":true}}'
    merged = {**doc, "stream_options": {**(options or {}), "include_usage": True}}
    return json.dumps(merged, separators=(",", ":")).encode()


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; re-serialized they would reach the engine as invalid JSON.
    raise ValueError(f"{name} is not a valid JSON value")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def validate(model: type[Body], doc: dict[str, Any]) -> Body:
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        param = ".".join(str(p) for p in first["loc"]) or None
        raise RequestValidationFailed(
            f"{param}: {first['msg']}" if param else str(first["msg"]), param=param
        ) from exc
