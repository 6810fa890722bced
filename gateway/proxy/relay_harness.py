"""`relay_stream` driven in one process, without sockets, for the relay's tests and
its benchmark (bench.relay_micro); nothing in the gateway imports it.

The engine side is real from the HTTP parser up: a `_Connection` fed scripted
reads (`ScriptedEngine`), the first (status line and headers: `HEAD`) at once,
each later read when the caller feeds it (after a client send, or on a clock). The client side is
the caller's ASGI `send`. Breaker and lease are no-ops; the request never
disconnects. `RelayModules` names the modules driven, so a benchmark can drive
another checkout's copy of them with the same harness.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, cast

from fastapi import Request
from starlette.types import Message, Send

from gateway.proxy import engine_http, relay, upstream
from gateway.proxy.engine_http import EngineClient, Origin, _Connection
from gateway.proxy.relay import RelayResult

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunked(body: bytes) -> bytes:
    """`body` as one chunk of a chunked HTTP body."""
    return b"%x\r\n" % len(body) + body + b"\r\n"


@dataclass(frozen=True)
class RelayModules:
    """The modules a run uses: this package's (`THESE`), or another checkout's copy."""

    engine_http: ModuleType
    relay: ModuleType
    upstream: ModuleType


THESE = RelayModules(engine_http, relay, upstream)


class Transport:
    """A transport that keeps what is written to it."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> None:
        return None


class _Breaker:
    def record_success(self) -> None: ...
    def record_failure(self) -> None: ...
    def release_trial(self) -> None: ...


class _Lease:
    breaker = _Breaker()

    def release(self) -> None: ...


class _Request:
    """What the relay reads of a request: its ASGI `receive`."""

    def __init__(self, receive: Callable[[], Awaitable[Message]]) -> None:
        self.receive = receive


class ScriptedEngine:
    """An engine response whose connection is fed `reads`: the first (the status line
    and headers, e.g. `HEAD`) at once, then one per `feed`. It stands in for the
    engine client too, keeping the connections put back for reuse."""

    def __init__(self, reads: Iterable[bytes], modules: RelayModules = THESE) -> None:
        self.conn: _Connection = modules.engine_http._Connection(asyncio.get_running_loop())
        self.conn.connection_made(cast(asyncio.BaseTransport, Transport()))
        self._pending = iter(reads)
        self.feed()
        self.kept: list[_Connection] = []
        origin = modules.engine_http.Origin("http", "engine", 80)
        self.response = modules.engine_http.EngineResponse(
            cast(EngineClient, self), origin, self.conn
        )

    def feed(self) -> None:
        """The next read arrives (none once all have)."""
        data = next(self._pending, None)
        if data is not None:
            self.conn.data_received(data)

    def put_back(self, origin: Origin, conn: _Connection) -> None:
        self.kept.append(conn)

    @property
    def reused(self) -> bool:
        """The relay gave the connection back for reuse."""
        return self.kept == [self.conn]


async def relay_to(
    engine: ScriptedEngine,
    send: Send,
    *,
    modules: RelayModules = THESE,
    timeout_s: float = 30.0,
) -> RelayResult:
    """`engine`'s answer streamed by `relay_stream` to `send` (status line at once, no
    usage chunk asked for, `timeout_s` for the first token and between events); the
    result the relay finished with."""
    never: asyncio.Future[Message] = asyncio.get_running_loop().create_future()

    async def receive() -> Message:
        return await never

    results: list[RelayResult] = []

    async def finish(result: RelayResult) -> None:
        results.append(result)

    opened = modules.upstream.Opened(
        decision=cast(Any, None), lease=cast(Any, _Lease()), response=engine.response
    )
    request = cast(Request, _Request(receive))
    streamed = await modules.relay.relay_stream(
        opened,
        request,
        keep_usage=False,
        started=time.monotonic(),
        first_token_timeout_s=timeout_s,
        idle_timeout_s=timeout_s,
        hold_headers=False,
        headers={},
        finish=finish,
    )
    await streamed({"type": "http"}, receive, send)
    return results[0]
