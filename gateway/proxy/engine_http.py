"""A lean HTTP/1.1 client for engine traffic: POST a JSON body, stream the answer back.

Why not aiohttp: on the gateway's time-to-first-token path its per-request
machinery (request and response objects, URL and header structures, the
connector) cost ~0.35 ms of CPU at concurrency 1, the largest single share of
what the gateway added (bench.gateway_overhead, traced per stage). Here a
request is one `write` on a pooled keep-alive connection, and the answer is
parsed by httptools (the C parser uvicorn uses) straight into a byte queue the
relay reads.

Scope is what engines speak: HTTP/1.1 over TCP, or TLS for https:// workers
(verified against the default trust store; SSL_CERT_FILE adds a private CA);
answers delimited by Content-Length, chunked encoding, or the connection's end. A request on a
reused connection that the engine had already closed (the keep-alive race) is
sent once more on a fresh connection, as long as no byte of an answer came.

A host that is there no more (partitioned: packets dropped, no RST) looks, on a
kept-alive connection, like an engine thinking. Two bounds tell them apart, both
raising EngineUnresponsive: a response-header deadline (an engine that took a
streamed request answers its status line at once, before any token), and, with
`unacked_timeout_s`, TCP_USER_TIMEOUT on every connection: the kernel drops one
whose sent request its peer left unacknowledged that long (any request; an
engine's TCP stack acknowledges a request at once, however long the answer takes).
"""

import asyncio
import contextlib
import errno
import socket
import ssl
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import httptools

# Body bytes buffered from one answer before reading from its engine pauses; a
# slow client then slows the engine's stream instead of growing the gateway.
_HIGH_WATER = 256 * 1024
# Idle connections kept per engine origin; more are closed when returned.
_MAX_IDLE_PER_ORIGIN = 256
# Linux only: elsewhere only the response-header deadline detects a silent host.
_TCP_USER_TIMEOUT: int | None = getattr(socket, "TCP_USER_TIMEOUT", None)


class EngineHTTPError(Exception):
    """The engine could not be reached, or its answer broke off or was not HTTP."""


class EngineConnectError(EngineHTTPError):
    """No connection to the engine could be made: the request was not sent."""


class EngineDisconnected(EngineHTTPError):
    """The engine closed the connection before its answer was complete."""


class EngineUnresponsive(EngineHTTPError):
    """The request was sent but its answer's headers did not come by the response-header
    deadline, or the engine's host never acknowledged it: the host is partitioned or the
    engine hung. No byte of an answer reached the gateway, so it may go elsewhere."""


class EngineProtocolError(EngineHTTPError):
    """The engine's answer is not valid HTTP/1.1."""


class EngineBodyTooLarge(Exception):
    """The engine's answer is larger than the gateway reads (`read(limit=)`)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the engine's answer is larger than {limit} bytes")
        self.limit = limit


@dataclass(frozen=True, slots=True)
class Origin:
    scheme: str
    host: str
    port: int

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def parse_base_url(base_url: str) -> tuple[Origin, str]:
    """The origin to connect to and the path prefix every request path goes under."""
    # NOTE: ASCII only: the host and path go into a Latin-1 request head, and a
    # worker URL that cannot be encoded must fail as this worker's connect error
    # (counted by its breaker), not as a 500 of every request routed to it.
    if not base_url.isascii():
        raise ValueError(f"engine URL must be ASCII, got {base_url!r}")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"engine URL must be http(s)://host[:port][/prefix], got {base_url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return Origin(parts.scheme, parts.hostname, port), parts.path.rstrip("/")


class _Connection(asyncio.Protocol):
    """One keep-alive connection; holds the state of the answer in flight."""

    def __init__(self, loop: asyncio.AbstractEventLoop, unacked_timeout_ms: int = 0) -> None:
        self._loop = loop
        self._unacked_timeout_ms = unacked_timeout_ms
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.pooled = False  # idle in the pool: any byte from the engine now is unsolicited
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        # One timer per answer for its read deadlines (see wait), not one per read.
        self._deadline: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.begin()

    def begin(self) -> None:
        """Reset the per-answer state before a request is written."""
        self.status = 0
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.got_bytes = False
        self.error: EngineHTTPError | None = None
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        # Content-Length or chunked; False: the body ends when the connection does.
        self._delimited = True

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # NOTE: a cast, not an isinstance check: uvloop's TCP transport is not an
        # asyncio.Transport subclass.
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._unacked_timeout_ms and _TCP_USER_TIMEOUT is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, _TCP_USER_TIMEOUT, self._unacked_timeout_ms)

    def data_received(self, data: bytes) -> None:
        if self.pooled:
            self.abort()
            return
        self.got_bytes = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(EngineProtocolError(f"invalid HTTP from the engine: {exc}"))
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.headers_done and not self._delimited and not self.complete:
            self.complete = True  # a body delimited by the connection's end
            self.keep_alive = False
        if isinstance(exc, OSError) and exc.errno == errno.ETIMEDOUT:
            # TCP_USER_TIMEOUT: what was sent stayed unacknowledged (the host is gone).
            self._fail(EngineUnresponsive("the engine's host stopped acknowledging the request"))
        else:
            self._fail(EngineDisconnected("the engine closed the connection"))

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self.raw_headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive()
        names = {name for name, _ in self.raw_headers}
        self._delimited = b"content-length" in names or b"transfer-encoding" in names
        self.headers_done = True
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.keep_alive and self._parser.should_keep_alive()
        self._wake()

    # used by the client and the response

    def _fail(self, error: EngineHTTPError) -> None:
        if self.error is None and not self.complete:
            self.error = error
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, deadline: float | None = None) -> None:
        """Until the parser or the connection reports anything new; TimeoutError once
        the loop's clock passes `deadline` first.

        NOTE: the deadline's timer is armed once and kept across waits: when it fires
        early for a deadline that has since moved later, it re-arms for the new one. A
        stream of N events then costs about one timer per deadline period instead of N
        (asyncio.timeout() per read cost a Timeout, a timer and two running-loop
        lookups, each a getpid() syscall on Python 3.11).
        """
        waiter = self._waiter = self._loop.create_future()
        self._deadline = deadline
        if deadline is not None:
            timer = self._timer
            if timer is None or timer.when() > deadline:
                if timer is not None:
                    timer.cancel()
                self._timer = self._loop.call_at(deadline, self._on_deadline)
        try:
            await waiter
        finally:
            self._waiter = None

    def _on_deadline(self) -> None:
        self._timer = None
        deadline, waiter = self._deadline, self._waiter
        if deadline is None or waiter is None or waiter.done():
            return  # not waiting on a deadline now: the next wait arms its own
        # NOTE: 1 ms of slack: loops fire timers up to their clock's resolution early
        # (uvloop's is 1 ms), and the deadline must not spin re-arming itself.
        if self._loop.time() >= deadline - 0.001:
            waiter.set_exception(TimeoutError())
        else:
            self._timer = self._loop.call_at(deadline, self._on_deadline)

    def stop_timer(self) -> None:
        timer, self._timer = self._timer, None
        self._deadline = None
        if timer is not None:
            timer.cancel()

    def take(self) -> bytes:
        """All body bytes buffered so far."""
        chunks = self.chunks
        data = chunks.popleft() if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self.buffered = 0
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.transport.resume_reading()
        return data

    def abort(self) -> None:
        self.closed = True
        self.stop_timer()
        if self.transport is not None:
            self.transport.close()

    def reusable(self) -> bool:
        return (
            self.complete
            and self.keep_alive
            and self.error is None
            and not self.closed
            and not self.chunks
        )


class EngineResponse:
    """An engine's answer: status and headers now, the body as it arrives."""

    __slots__ = ("_client", "_conn", "_finished", "_origin", "status")

    def __init__(self, client: "EngineClient", origin: Origin, conn: _Connection) -> None:
        self._client = client
        self._origin = origin
        self._conn = conn
        self._finished = False
        self.status = conn.status

    @property
    def headers(self) -> dict[str, str]:
        return {n.decode("latin-1"): v.decode("latin-1") for n, v in self._conn.raw_headers}

    @property
    def ended(self) -> bool:
        """The whole body is in hand and read: `readany` would return b"" at once."""
        conn = self._conn
        return conn.complete and not conn.chunks

    def deadline(self, timeout_s: float) -> float:
        """The `readany` deadline `timeout_s` from now, on the event loop's clock."""
        return self._conn._loop.time() + timeout_s

    async def readany(self, deadline: float | None = None) -> bytes:
        """The body bytes that arrived since the last call (waiting for some); b"" at the end.
        TimeoutError when none came by `deadline` (from `deadline()`)."""
        conn = self._conn
        while not conn.chunks:
            if conn.complete:
                return b""
            if conn.error is not None:
                raise conn.error
            await conn.wait(deadline)
        return conn.take()

    async def read(self, limit: int | None = None, deadline: float | None = None) -> bytes:
        """The whole body; with `limit`, EngineBodyTooLarge as soon as it is known to be
        larger (its Content-Length, or the bytes read so far), so it is never held whole.
        TimeoutError when it is not all in by `deadline` (from `deadline()`)."""
        if limit is not None:
            declared = self.content_length()
            if declared is not None and declared > limit:
                raise EngineBodyTooLarge(limit)
        parts = []
        size = 0
        while chunk := await self.readany(deadline):
            size += len(chunk)
            if limit is not None and size > limit:
                raise EngineBodyTooLarge(limit)
            parts.append(chunk)
        return b"".join(parts)

    def content_length(self) -> int | None:
        for name, value in self._conn.raw_headers:
            if name == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return None
        return None

    def release(self) -> None:
        """Done with the answer: a fully read one returns its connection to the pool."""
        if self._finished:
            return
        self._finished = True
        conn = self._conn
        conn.stop_timer()
        if conn.reusable():
            self._client.put_back(self._origin, conn)
        else:
            conn.abort()

    def close(self) -> None:
        """Drop the connection: how an engine learns that the request was abandoned."""
        if not self._finished:
            self._finished = True
            self._conn.abort()


class EngineClient:
    """Pooled keep-alive connections per engine origin; no cap on their number."""

    def __init__(
        self,
        *,
        connect_timeout_s: float,
        keepalive_s: float = 3.0,
        unacked_timeout_s: float | None = None,
    ) -> None:
        self.connect_timeout_s = connect_timeout_s
        # TCP_USER_TIMEOUT of every connection (None: the kernel's, ~15 min of retries).
        self._unacked_ms = max(round(unacked_timeout_s * 1000), 1) if unacked_timeout_s else 0
        # NOTE: below the engines' own keep-alive (vLLM/uvicorn: 5 s), so the gateway
        # rarely writes to a connection the engine is closing.
        self.keepalive_s = keepalive_s
        self._idle: dict[Origin, list[_Connection]] = {}
        self._bases: dict[str, tuple[Origin, str]] = {}
        self._ssl: ssl.SSLContext | None = None
        self._closed = False
        self._swept_at = time.monotonic()

    async def post(
        self,
        base_url: str,
        path: str,
        body: bytes,
        headers: Mapping[str, str],
        *,
        timeout_s: float | None = None,
        header_timeout_s: float | None = None,
    ) -> EngineResponse:
        """Send the request; return once the engine's status line and headers are in.

        Raises EngineHTTPError when that fails (connect, broken connection, not
        HTTP); EngineUnresponsive when the headers are not in `header_timeout_s` after
        the call (or the host stopped acknowledging); TimeoutError when they are not
        in `timeout_s` (the request's own deadline). Both are on the loop's clock, one
        timer per request. Cancellation drops the connection.
        """
        if self._closed:
            raise EngineConnectError("the engine client is closed")
        origin, prefix = self._base(base_url)
        request = self._encode(origin, prefix + path, body, headers)
        now = asyncio.get_running_loop().time()
        deadline = now + timeout_s if timeout_s is not None else None
        silent_at = now + header_timeout_s if header_timeout_s is not None else None
        if silent_at is not None and deadline is not None and silent_at >= deadline:
            silent_at = None  # the request's own deadline comes first: a TimeoutError
        conn = self._checkout(origin)
        if conn is not None:
            try:
                return await self._exchange(origin, conn, request, deadline, silent_at)
            except EngineUnresponsive:
                raise  # the host is silent: a fresh connection to it would wait again
            except EngineHTTPError:
                if conn.got_bytes:
                    raise
                # The keep-alive race: the engine closed the idle connection as we wrote.
        conn = await self._connect(origin)
        return await self._exchange(origin, conn, request, deadline, silent_at)

    async def _exchange(
        self,
        origin: Origin,
        conn: _Connection,
        request: bytes,
        deadline: float | None,
        silent_at: float | None,
    ) -> EngineResponse:
        conn.begin()
        assert conn.transport is not None
        silent = silent_at is not None
        first = silent_at if silent else deadline
        try:
            conn.transport.write(request)
            while not conn.headers_done:
                if conn.error is not None:
                    raise conn.error
                try:
                    await conn.wait(first)
                except TimeoutError:
                    if silent:
                        raise EngineUnresponsive(
                            f"no answer from {origin.host}:{origin.port} within the "
                            "response-header timeout"
                        ) from None
                    raise
        except BaseException:
            conn.abort()
            raise
        conn.stop_timer()
        return EngineResponse(self, origin, conn)

    @staticmethod
    def _encode(origin: Origin, path: str, body: bytes, headers: Mapping[str, str]) -> bytes:
        lines = [f"POST {path} HTTP/1.1", f"host: {origin.host_header}"]
        lines.append(f"content-length: {len(body)}")
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"invalid header {name!r}")
            lines.append(f"{name}: {value}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    def _base(self, base_url: str) -> tuple[Origin, str]:
        base = self._bases.get(base_url)
        if base is None:
            try:
                base = parse_base_url(base_url)
            except ValueError as exc:
                raise EngineConnectError(str(exc)) from exc
            if len(self._bases) > 4096:
                self._bases.clear()  # worker churn must not grow the cache without bound
            self._bases[base_url] = base
        return base

    def _checkout(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # the most recently used: the likeliest to be open
            if self._expired(conn, now):
                conn.abort()
                continue
            conn.pooled = False
            return conn
        return None

    def _expired(self, conn: _Connection, now: float) -> bool:
        return conn.closed or now - conn.idle_since > self.keepalive_s

    def drop_idle(self, base_url: str) -> int:
        """Close the idle connections to `base_url`'s origin (its host went silent: they
        would each wait out the deadline again); how many were closed."""
        origin, _ = self._base(base_url)
        idle = self._idle.pop(origin, [])
        for conn in idle:
            conn.abort()
        return len(idle)

    def put_back(self, origin: Origin, conn: _Connection) -> None:
        now = time.monotonic()
        if now - self._swept_at > self.keepalive_s:
            self._sweep(now)
        idle = self._idle.setdefault(origin, [])
        if self._closed or len(idle) >= _MAX_IDLE_PER_ORIGIN:
            conn.abort()
            return
        conn.idle_since = now
        conn.pooled = True
        idle.append(conn)

    def _sweep(self, now: float) -> None:
        """Close expired idle connections of every origin; forget origins left with none
        (workers that left the snapshot must not keep sockets or entries forever)."""
        self._swept_at = now
        for origin, idle in list(self._idle.items()):
            keep = []
            for conn in idle:
                if self._expired(conn, now):
                    conn.abort()
                else:
                    keep.append(conn)
            if keep:
                self._idle[origin] = keep
            else:
                del self._idle[origin]

    async def _connect(self, origin: Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        tls = self._ssl_context() if origin.scheme == "https" else None
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await loop.create_connection(
                    lambda: _Connection(loop, self._unacked_ms),
                    origin.host,
                    origin.port,
                    ssl=tls,
                    server_hostname=origin.host if tls is not None else None,
                )
        except TimeoutError as exc:
            raise EngineConnectError(
                f"connecting to {origin.host}:{origin.port} timed out"
            ) from exc
        except OSError as exc:
            raise EngineConnectError(
                f"cannot connect to {origin.host}:{origin.port}: {exc.strerror or exc}"
            ) from exc
        return conn

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl

    async def close(self) -> None:
        """Close the idle connections; answers in flight keep theirs until released."""
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.abort()
        self._idle.clear()
