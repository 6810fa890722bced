"""Relay the engine's answer to the client and account for the finished request.

Streaming: the first engine event is awaited before the client gets any byte
(so a first-token timeout is still a clean 504 and fallback stays possible),
then every event is forwarded as it arrives. The engine is always asked for
usage so tokens and speculative metrics can be accounted; the usage chunk
reaches the client only if it asked for it.
"""

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import anyio
from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from gateway.errors import ServiceUnavailable, UpstreamError, UpstreamTimeout
from gateway.proxy.sanitize import NO_SPEC, SpecStats, Usage, sanitize, spec_stats, usage_of
from gateway.proxy.sse import DONE, frame, sse_data
from gateway.proxy.upstream import Opened
from gateway.telemetry.record import Outcome


@dataclass
class RelayResult:
    """What the relay learned; turned into a RequestRecord by the caller."""

    outcome: Outcome = "ok"
    http_status: int = 200
    usage: Usage | None = None
    spec: SpecStats = NO_SPEC
    first_token_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


Finish = Callable[[RelayResult], Awaitable[None]]


def _event(payload: bytes, *, keep_usage: bool, result: RelayResult) -> bytes | None:
    """Client-facing frame for one engine event, or None to swallow it."""
    if payload == DONE:
        return frame(payload)
    try:
        doc = json.loads(payload)
    except ValueError:
        return None  # not an OpenAI event; never forward what we cannot vet
    if not isinstance(doc, dict):
        return None
    if "error" in doc:
        result.outcome, result.http_status = "error", 502
        return frame(json.dumps({"error": doc["error"]}).encode())
    stats = spec_stats(doc)
    if stats is not None:
        result.spec = stats
    usage = usage_of(doc)
    if usage is not None:
        result.usage = usage
    if not doc.get("choices") and "usage" in doc and not keep_usage:
        return None  # the final usage-only chunk the client did not ask for
    clean = sanitize(doc, keep_usage=keep_usage)
    if clean == doc:
        # NOTE: the common case (nothing to strip) forwards the engine's own bytes:
        # re-encoding every token chunk was a measurable share of the gateway's CPU.
        return frame(payload)
    return frame(json.dumps(clean, ensure_ascii=False).encode())


class RelayResponse(StreamingResponse):
    """A stream that always runs its cleanup, and stops the moment the client leaves.

    Starlette's own disconnect listener depends on the ASGI spec version the
    server announces; this one listens unconditionally, and `on_close` runs even
    if the body iterator was never started.
    """

    def __init__(
        self,
        content: AsyncIterator[bytes],
        *,
        headers: dict[str, str],
        on_close: Callable[[bool], Awaitable[None]],
    ) -> None:
        super().__init__(content, media_type="text/event-stream", headers=headers)
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        disconnected = False
        try:
            async with anyio.create_task_group() as tg:

                async def stream() -> None:
                    nonlocal disconnected
                    try:
                        await self.stream_response(send)
                    except OSError:
                        disconnected = True
                    tg.cancel_scope.cancel()

                tg.start_soon(stream)
                await self.listen_for_disconnect(receive)
                disconnected = True
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._on_close(disconnected)


class ClientLeft(Exception):
    """The client disconnected before the engine's first event."""


async def _first_event(events: AsyncIterator[bytes], request: Request, timeout_s: float) -> bytes:
    # NOTE: prefill can take long; a client that leaves meanwhile must not keep
    # the engine busy until its first token, so the wait races the disconnect.
    first = asyncio.ensure_future(asyncio.wait_for(anext(events), timeout=timeout_s))
    leaving = asyncio.ensure_future(_wait_disconnect(request))
    try:
        await asyncio.wait({first, leaving}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        leaving.cancel()
        if not first.done():
            first.cancel()
            with contextlib.suppress(BaseException):
                await first
    if not first.done() or first.cancelled():
        raise ClientLeft
    return first.result()


async def relay_stream(
    opened: Opened,
    request: Request,
    *,
    keep_usage: bool,
    started: float,
    first_token_timeout_s: float,
    idle_timeout_s: float,
    headers: dict[str, str],
    finish: Finish,
) -> RelayResponse:
    result = RelayResult()
    events = sse_data(opened.response.content.iter_any())
    remaining = max(first_token_timeout_s - (time.monotonic() - started), 0.001)
    try:
        first = await _first_event(events, request, remaining)
    except BaseException as exc:
        opened.response.close()
        if isinstance(exc, TimeoutError):
            opened.lease.breaker.release_trial()
            result.outcome, result.http_status = "error", 504
            err: BaseException = UpstreamTimeout("No first token from the engine in time")
        elif isinstance(exc, StopAsyncIteration | aiohttp.ClientError):
            opened.lease.breaker.record_failure()
            result.outcome, result.http_status = "error", 502
            err = UpstreamError("The engine closed the stream before the first token")
        else:
            opened.lease.breaker.release_trial()
            result.outcome, result.http_status = "cancelled", 499
            err = exc
            if isinstance(exc, ClientLeft):
                err = ServiceUnavailable("client disconnected", code="client_disconnected")
        opened.lease.release()
        await finish(result)
        raise err from None
    result.first_token_at = time.monotonic()
    opened.lease.breaker.record_success()

    drained = False  # the engine ended the stream itself: its connection can be reused

    async def body() -> AsyncIterator[bytes]:
        nonlocal drained
        payload: bytes | None = first
        while payload is not None:
            out = _event(payload, keep_usage=keep_usage, result=result)
            if out is not None:
                yield out
            try:
                # NOTE: asyncio.timeout, not wait_for: no extra Task per chunk on the hot path.
                async with asyncio.timeout(idle_timeout_s):
                    payload = await anext(events)
            except StopAsyncIteration:
                drained = True
                payload = None
            except TimeoutError:
                result.outcome, result.http_status = "error", 504
                yield _error_frame("The engine stalled mid-stream", "timeout_error", "idle_timeout")
                payload = None
            except aiohttp.ClientError:
                result.outcome, result.http_status = "error", 502
                yield _error_frame("The engine stream broke", "upstream_error", "stream_broken")
                payload = None

    async def on_close(disconnected: bool) -> None:
        # NOTE: closing (not releasing) an unfinished engine response drops its
        # connection, which is how vLLM learns the client is gone and aborts.
        if drained:
            opened.response.release()
        else:
            opened.response.close()
        opened.lease.release()
        if disconnected and result.outcome == "ok" and result.usage is None:
            result.outcome, result.http_status = "cancelled", 499
        await finish(result)

    return RelayResponse(body(), headers=headers, on_close=on_close)


def _error_frame(message: str, type_: str, code: str) -> bytes:
    return frame(json.dumps({"error": {"message": message, "type": type_, "code": code}}).encode())


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def relay_json(
    opened: Opened,
    request: Request,
    *,
    timeout_s: float,
    headers: dict[str, str],
    finish: Finish,
) -> JSONResponse:
    """Non-streaming: read the whole engine answer, or drop it if the client leaves."""
    result = RelayResult()
    reading = asyncio.ensure_future(asyncio.wait_for(opened.response.read(), timeout=timeout_s))
    leaving = asyncio.ensure_future(_wait_disconnect(request))
    try:
        await asyncio.wait({reading, leaving}, return_when=asyncio.FIRST_COMPLETED)
        if not reading.done():
            reading.cancel()
            result.outcome, result.http_status = "cancelled", 499
            raise ServiceUnavailable("client disconnected", code="client_disconnected")
        try:
            content = reading.result()
        except TimeoutError as exc:
            opened.lease.breaker.release_trial()
            result.outcome, result.http_status = "error", 504
            raise UpstreamTimeout("The engine did not finish in time") from exc
        except aiohttp.ClientError as exc:
            opened.lease.breaker.record_failure()
            result.outcome, result.http_status = "error", 502
            raise UpstreamError("The engine connection broke") from exc
        opened.lease.breaker.record_success()
        try:
            doc = json.loads(content)
        except ValueError as exc:
            result.outcome, result.http_status = "error", 502
            raise UpstreamError("The engine sent an invalid body") from exc
        if not isinstance(doc, dict):
            result.outcome, result.http_status = "error", 502
            raise UpstreamError("The engine sent an invalid body")
        result.usage = usage_of(doc)
        result.spec = spec_stats(doc) or NO_SPEC
        result.first_token_at = None
        return JSONResponse(sanitize(doc), headers=headers)
    finally:
        leaving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await leaving
        if not reading.done():
            reading.cancel()
        if reading.done() and not reading.cancelled() and reading.exception() is None:
            opened.response.release()
        else:
            opened.response.close()
        opened.lease.release()
        await finish(result)
