"""Relay the engine's answer to the client and account for the finished request.

Streaming: the status line goes out when the engine has accepted the request
(fallback between pools happens before that, in gateway.proxy.upstream), then
every event is forwarded as it arrives; a first-token timeout or an engine
failure is a typed error event. With `hold_stream_headers` the first event is
awaited before the client gets any byte, so those failures are a 504/502
instead. The engine is always asked for usage so tokens and speculative metrics
can be accounted; the usage chunk reaches the client only if it asked for it.
"""

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.types import Message, Send

from gateway.errors import ClientDisconnected, GatewayError, UpstreamError, UpstreamTimeout
from gateway.proxy.client_stream import DisconnectWatch, RelayResponse
from gateway.proxy.engine_http import EngineBodyTooLarge, EngineHTTPError, EngineResponse
from gateway.proxy.sanitize import (
    _CHOICE,
    _TOP_LEVEL,
    NO_SPEC,
    SpecStats,
    Usage,
    is_clean,
    sanitize,
    spec_stats,
    usage_of,
)
from gateway.proxy.sse import DONE, EventTooLarge, SSESplitter, frame
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
    # Choices with text in the events forwarded so far: at least one token each (more
    # when speculation verified several in one step). What a client that leaves
    # before the usage chunk is charged for.
    streamed_tokens: int = 0
    error_code: str | None = None  # the typed error's code when outcome is "error"
    extra: dict[str, Any] = field(default_factory=dict)


Finish = Callable[[RelayResult], Awaitable[None]]

# What proxies between the gateway and the client need to pass events on as they come
# (nginx buffers a response unless told `x-accel-buffering: no`).
STREAM_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}

INVALID_EVENT = "invalid_event"  # RelayResult.extra key: the stream ends after its error


_fast_decode = msgspec.json.Decoder().decode
_decode = json.JSONDecoder().decode


def _parse(payload: bytes) -> Any:
    """One event's JSON. msgspec decodes a token chunk ~4x faster than json; what it
    refuses (NaN or Infinity, which Python engines may write) goes to json instead."""
    try:
        return _fast_decode(payload)
    except msgspec.DecodeError:
        return _decode(payload.decode())


# A token chunk's top-level keys: no error, usage or metrics to read, nothing to strip.
_TOKEN_CHUNK_KEYS = _TOP_LEVEL - {"usage"}

_RAW_NULL = msgspec.Raw(b"null")
_DONE_FRAME = frame(DONE)


class _TokenChoice(msgspec.Struct, forbid_unknown_fields=True):
    """One choice of a token chunk: only `_CHOICE` keys (the rest are never read)."""

    index: msgspec.Raw = _RAW_NULL
    delta: Any = None
    message: msgspec.Raw = _RAW_NULL
    text: Any = None
    logprobs: msgspec.Raw = _RAW_NULL
    finish_reason: msgspec.Raw = _RAW_NULL


class _TokenChunk(msgspec.Struct, forbid_unknown_fields=True):
    """A token chunk: `_TOKEN_CHUNK_KEYS` only, `choices` a list of `_TokenChoice`."""

    choices: list[_TokenChoice]
    id: msgspec.Raw = _RAW_NULL
    object: msgspec.Raw = _RAW_NULL
    created: msgspec.Raw = _RAW_NULL
    model: msgspec.Raw = _RAW_NULL
    system_fingerprint: msgspec.Raw = _RAW_NULL
    service_tier: msgspec.Raw = _RAW_NULL


assert set(_TokenChunk.__struct_fields__) == _TOKEN_CHUNK_KEYS
assert set(_TokenChoice.__struct_fields__) == _CHOICE
_token_chunk = msgspec.json.Decoder(_TokenChunk).decode


def client_frame(
    payload: bytes, *, keep_usage: bool, result: RelayResult, framed: bytes | None = None
) -> bytes | None:
    """Client-facing frame for one engine event, or None to swallow it. `framed`:
    the event's bytes as read, when they equal `frame(payload)`; forwarded as they are
    when the event passes unchanged."""
    if payload == DONE:
        return frame(payload)
    try:
        # NOTE: the common case, a token chunk, checked in C: the shape the dict path
        # below accepts as one (known keys only, choices a list of objects), with the
        # fields never read left undecoded. Anything else (NaN included) goes below.
        chunk = _token_chunk(payload)
    except msgspec.DecodeError:  # ValidationError is one
        pass
    else:
        tokens = 0
        for choice in chunk.choices:
            delta = choice.delta
            if delta.get("content") if type(delta) is dict else choice.text:
                tokens += 1
        result.streamed_tokens += tokens
        return framed if framed is not None else frame(payload)
    try:
        doc = _parse(payload)
    except ValueError:
        doc = None
    if type(doc) is dict and doc.keys() <= _TOKEN_CHUNK_KEYS:
        # NOTE: the common case, a token chunk, in one pass over its choices (what
        # is_clean and _tokens_in would each walk); anything else takes the full path.
        choices = doc.get("choices")
        if type(choices) is list:
            tokens = 0
            for choice in choices:
                if type(choice) is not dict or not choice.keys() <= _CHOICE:
                    break
                delta = choice.get("delta")
                if delta.get("content") if type(delta) is dict else choice.get("text"):
                    tokens += 1
            else:
                result.streamed_tokens += tokens
                return framed if framed is not None else frame(payload)
    if not isinstance(doc, dict):
        # NOTE: never forwarded (we cannot vet it), and never dropped silently either:
        # a stream of such events used to reach the client as an empty success.
        result.outcome, result.http_status = "error", 502
        result.error_code = "invalid_engine_event"
        result.extra[INVALID_EVENT] = True
        return _error_frame(
            "The engine sent an event that is not a JSON object",
            "upstream_error",
            "invalid_engine_event",
        )
    if "error" in doc:
        result.outcome, result.http_status = "error", 502
        result.error_code = "engine_error"  # ours: the engine's message is never kept
        return engine_error_frame(doc["error"])
    choices = doc.get("choices")
    if choices:
        result.streamed_tokens += _tokens_in(choices)
    # NOTE: key checks first: only the final chunk carries usage and metrics, and
    # reading them from every token chunk was a measurable share of the relay's CPU.
    if "metrics" in doc:
        stats = spec_stats(doc)
        if stats is not None:
            result.spec = stats
    if "usage" in doc:
        usage = usage_of(doc)
        if usage is not None:
            result.usage = usage
        if not keep_usage and not doc.get("choices"):
            return None  # the final usage-only chunk the client did not ask for
    if is_clean(doc, keep_usage=keep_usage):
        # NOTE: the common case (nothing to strip) forwards the engine's own bytes:
        # re-encoding every token chunk was a measurable share of the gateway's CPU.
        return framed if framed is not None else frame(payload)
    # NOTE: ASCII escapes: a lone surrogate in the engine's text could not be encoded.
    return frame(json.dumps(sanitize(doc, keep_usage=keep_usage)).encode())


def engine_error_frame(error: Any) -> bytes:
    """The gateway's typed error event for an engine's own (whatever its shape: a
    string, `"type": "x"`, `"code": 500`): the engine's message when it has one, our
    type and code, and the engine's code in `details`."""
    message = "The engine reported an error"
    detail: dict[str, Any] = {}
    if isinstance(error, dict):
        if isinstance(error.get("message"), str) and error["message"]:
            message = error["message"][:2000]
        engine_code = error.get("code")
        if isinstance(engine_code, str | int) and not isinstance(engine_code, bool):
            detail["engine_code"] = str(engine_code)[:64]
    elif isinstance(error, str) and error:
        message = error[:2000]
    body: dict[str, Any] = {"message": message, "type": "upstream_error", "code": "engine_error"}
    if detail:
        body["details"] = detail
    return frame(json.dumps({"error": body}).encode())


def _tokens_in(choices: Any) -> int:
    """Choices carrying generated text in one event (chat delta or completion text)."""
    if not isinstance(choices, list):
        return 0
    count = 0
    for choice in choices:
        if isinstance(choice, dict):
            delta = choice.get("delta")
            piece = delta.get("content") if isinstance(delta, dict) else choice.get("text")
            if piece:
                count += 1
    return count


class EngineEnded(Exception):
    """The engine closed the stream without a single event."""


async def _next_batch(
    response: EngineResponse, splitter: SSESplitter, deadline: float
) -> list[bytes]:
    """The complete events of the engine's next chunk(s); [] once the stream has ended.
    TimeoutError when they are not all in by `deadline` (the response's clock)."""
    while True:
        chunk = await response.readany(deadline)
        if not chunk:
            tail = splitter.tail()
            return [tail] if tail is not None else []
        events = splitter.feed(chunk)
        if events:
            return events


async def _next_body(
    response: EngineResponse,
    splitter: SSESplitter,
    deadline: float,
    keep_usage: bool,
    result: RelayResult,
) -> bytes | None:
    """The client's bytes for the engine's next chunk(s) (b"" when none are for it: a
    usage chunk it did not ask for); None once the stream has ended. Raises as
    `_next_batch`."""
    while True:
        chunk = await response.readany(deadline)
        if not chunk:
            tail = splitter.tail()
            return None if tail is None else b"".join(_frames([tail], keep_usage, result))
        # NOTE: the common case, one token event per read (an engine writes each as
        # one), exactly as `frame` writes it: `data: `, a payload starting with `{`.
        # SSESplitter.feed would give chunk[6:-2], and `frame` of that is `chunk`:
        # its bytes go on as read, not split and framed again.
        if splitter.is_one_event(chunk, b"data: {"):
            out = client_frame(chunk[6:-2], keep_usage=keep_usage, result=result, framed=chunk)
            return out or b""
        events = splitter.feed(chunk)
        if events:
            return b"".join(_frames(events, keep_usage, result))


async def relay_stream(
    opened: Opened,
    request: Request,
    *,
    keep_usage: bool,
    started: float,
    first_token_timeout_s: float,
    idle_timeout_s: float,
    hold_headers: bool,
    headers: dict[str, str],
    finish: Finish,
    max_event_bytes: int | None = None,
) -> RelayResponse:
    """The client's event stream. With `hold_headers` the first token is awaited here,
    so a failure before it is still an HTTP error; without, the status line goes out
    at once and such a failure is an error event."""
    result = RelayResult()
    response = opened.response
    breaker = opened.lease.breaker
    splitter = SSESplitter(max_event_bytes)
    first: list[bytes] = []
    drained = False  # the engine ended the stream itself: its connection can be reused

    async def first_batch() -> None:
        remaining = max(first_token_timeout_s - (time.monotonic() - started), 0.001)
        first[:] = await _next_batch(response, splitter, response.deadline(remaining))
        if not first:
            raise EngineEnded
        result.first_token_at = time.monotonic()
        breaker.record_success()

    def first_failed(exc: BaseException) -> GatewayError | None:
        """Account an engine failure before the first token; None if `exc` is not one."""
        if isinstance(exc, TimeoutError):
            breaker.release_trial()
            result.outcome, result.http_status = "error", 504
            result.error_code = "first_token_timeout"
            return UpstreamTimeout(
                "No first token from the engine in time", code="first_token_timeout"
            )
        if isinstance(exc, EventTooLarge):
            breaker.record_failure()
            result.outcome, result.http_status = "error", 502
            result.error_code = "engine_event_too_large"
            return UpstreamError(str(exc), code="engine_event_too_large")
        if isinstance(exc, EngineEnded | EngineHTTPError):
            breaker.record_failure()
            result.outcome, result.http_status = "error", 502
            result.error_code = "stream_broken"
            return UpstreamError(
                "The engine closed the stream before the first token", code="stream_broken"
            )
        return None

    async def relay(send: Send, start: Message) -> bool:
        """The events until the stream ends; True when the last send ended the body."""
        nonlocal drained
        if not hold_headers:
            await send(start)
            try:
                await first_batch()
            except (TimeoutError, EngineEnded, EngineHTTPError, EventTooLarge) as exc:
                error = first_failed(exc)
                assert error is not None
                await _send_error(send, error.message, error.error_type, error.code or "")
                return False
        # NOTE: the first frames are ready before a held status line goes out, so
        # the first token follows it at once.
        body = b"".join(_frames(first, keep_usage, result))
        if hold_headers:
            await send(start)
        while True:
            # NOTE: the events of one engine read leave in one ASGI message: under load
            # several arrive together, and each send is the costliest step per event.
            # When that read ended with `[DONE]` and the end of the engine's body
            # (engine.fake writes them together), the same message ends the response:
            # one send fewer per request, and nothing waited for. Checked only after
            # `[DONE]`, so token reads pay one suffix comparison.
            last = body.endswith(_DONE_FRAME) and response.ended and not splitter.buffered
            if body or last:
                await send({"type": "http.response.body", "body": body, "more_body": not last})
            if result.extra.get(INVALID_EVENT):
                return last  # the error event is out; closing drops the engine's request
            if last:
                drained = True
                return True
            try:
                # NOTE: a deadline the engine connection enforces with one timer per
                # stream, not asyncio.timeout() per chunk (see EngineResponse.readany).
                more = await _next_body(
                    response, splitter, response.deadline(idle_timeout_s), keep_usage, result
                )
            except TimeoutError:
                result.outcome, result.http_status = "error", 504
                result.error_code = "idle_timeout"
                await _send_error(
                    send, "The engine stalled mid-stream", "timeout_error", "idle_timeout"
                )
                return False
            except EngineHTTPError:
                result.outcome, result.http_status = "error", 502
                result.error_code = "stream_broken"
                await _send_error(
                    send, "The engine stream broke", "upstream_error", "stream_broken"
                )
                return False
            except EventTooLarge as exc:
                result.outcome, result.http_status = "error", 502
                result.error_code = "engine_event_too_large"
                await _send_error(send, str(exc), "upstream_error", "engine_event_too_large")
                return False
            if more is None:
                drained = True
                return False
            body = more

    async def on_close(disconnected: bool) -> None:
        # NOTE: closing (not releasing) an unfinished engine response drops its
        # connection, which is how vLLM learns the client is gone and aborts.
        if drained:
            response.release()
        else:
            response.close()
        if result.first_token_at is None and result.outcome == "ok":
            breaker.release_trial()  # the client left before the engine proved anything
        opened.lease.release()
        if disconnected and result.outcome == "ok" and result.usage is None:
            result.outcome, result.http_status = "cancelled", 499
        await finish(result)

    # NOTE: prefill can take long; a client that leaves meanwhile must not keep
    # the engine busy until its first token, so the wait is watched from here on.
    watch = DisconnectWatch(request.receive)
    relay_response = RelayResponse(
        relay, watch=watch, headers=headers | STREAM_HEADERS, on_close=on_close
    )
    if not hold_headers:
        return relay_response
    try:
        await first_batch()
    except BaseException as exc:
        left = isinstance(exc, asyncio.CancelledError) and watch.swallow()
        watch.stop()
        response.close()
        error = None if left else first_failed(exc)
        if error is None:
            breaker.release_trial()
            result.outcome, result.http_status = "cancelled", 499
        opened.lease.release()
        await finish(result)
        if left:
            raise ClientDisconnected() from None
        raise (error or exc) from None
    return relay_response


def _frames(batch: list[bytes], keep_usage: bool, result: RelayResult) -> list[bytes]:
    frames = [f for p in batch if (f := client_frame(p, keep_usage=keep_usage, result=result))]
    if result.extra.get(INVALID_EVENT):
        # Nothing after the error event (no [DONE] that would read as success).
        first_error = next(i for i, f in enumerate(frames) if b"invalid_engine_event" in f)
        return frames[: first_error + 1]
    return frames


async def _send_error(send: Send, message: str, type_: str, code: str) -> None:
    body = _error_frame(message, type_, code)
    await send({"type": "http.response.body", "body": body, "more_body": True})


def _error_frame(message: str, type_: str, code: str) -> bytes:
    return frame(json.dumps({"error": {"message": message, "type": type_, "code": code}}).encode())


async def relay_json(
    opened: Opened,
    request: Request,
    *,
    timeout_s: float,
    headers: dict[str, str],
    finish: Finish,
    max_body_bytes: int | None = None,
    watch: DisconnectWatch | None = None,
) -> JSONResponse:
    """Non-streaming: read the whole engine answer, or drop it if the client leaves.
    `watch`: the one armed while the engine's headers were awaited, if any."""
    result = RelayResult()
    response = opened.response
    read = False
    watch = watch or DisconnectWatch(request.receive)
    try:
        try:
            async with asyncio.timeout(timeout_s):
                content = await response.read(limit=max_body_bytes)
            read = True
        except asyncio.CancelledError:
            if not watch.swallow():
                raise
            opened.lease.breaker.release_trial()
            result.outcome, result.http_status = "cancelled", 499
            raise ClientDisconnected() from None
        except TimeoutError as exc:
            opened.lease.breaker.release_trial()
            result.outcome, result.http_status = "error", 504
            result.error_code = UpstreamTimeout.default_code
            raise UpstreamTimeout("The engine did not finish in time") from exc
        except EngineHTTPError as exc:
            opened.lease.breaker.record_failure()
            result.outcome, result.http_status = "error", 502
            result.error_code = UpstreamError.default_code
            raise UpstreamError("The engine connection broke") from exc
        except EngineBodyTooLarge as exc:
            # NOTE: not read whole (nor parsed): the connection is dropped below.
            opened.lease.breaker.record_failure()
            result.outcome, result.http_status = "error", 502
            result.error_code = "engine_body_too_large"
            raise UpstreamError(
                str(exc), code="engine_body_too_large", details={"limit_bytes": exc.limit}
            ) from exc
        finally:
            watch.stop()
        opened.lease.breaker.record_success()
        try:
            # NOTE: NaN and Infinity are refused: Python engines can write them, but
            # they are not JSON and the client's answer could not be encoded (a 500).
            doc = json.loads(content, parse_constant=_refuse_constant)
        except ValueError as exc:
            result.outcome, result.http_status = "error", 502
            result.error_code = UpstreamError.default_code
            raise UpstreamError("The engine sent an invalid body") from exc
        if not isinstance(doc, dict):
            result.outcome, result.http_status = "error", 502
            result.error_code = UpstreamError.default_code
            raise UpstreamError("The engine sent an invalid body")
        result.usage = usage_of(doc)
        result.spec = spec_stats(doc) or NO_SPEC
        result.first_token_at = None
        return JSONResponse(sanitize(doc), headers=headers)
    finally:
        if read:
            response.release()
        else:
            response.close()
        opened.lease.release()
        await finish(result)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
