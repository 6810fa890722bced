"""An OpenAI-shaped engine that misbehaves on request, for the gateway's hostile cases.

A fixture, not a model: the first message's content picks the misbehaviour, since a
real vLLM cannot be made to answer NaN, redirect, or stream garbage on purpose.
"""

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from engine.fake import read_body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

NAN_JSON = "nan_json"  # non-streamed answer with NaN in it
REDIRECT = "redirect"  # 302 with a JSON error body
GARBAGE_STREAM = "garbage_stream"  # 200 event stream whose events are not JSON
OK = "ok"  # a well-formed answer
MODES = (NAN_JSON, REDIRECT, GARBAGE_STREAM, OK)
ERROR_EVENT = "error_event"  # 200 stream whose event is an engine error of its own shape
TEAPOT = "teapot"  # 418, a status no OpenAI engine sends for a completion
BAD_REQUEST = "bad_request"  # vLLM's 400: `"code": 400`, a status number, not a name
HUGE_BODY = "huge_body"  # a 48 MiB non-streamed answer
HUGE_EVENT = "huge_event"  # a stream whose one event is 48 MiB
HUGE_BYTES = 48 << 20
# Once each per hostile run (the huge ones cost 48 MiB each), streamed and not.
ENGINE_ANSWER_MODES = (ERROR_EVENT, TEAPOT, BAD_REQUEST, HUGE_BODY, HUGE_EVENT)

_CHUNK = {
    "id": "chatcmpl-hostile",
    "object": "chat.completion.chunk",
    "created": 0,
    "model": "tiny",
    "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}],
}
_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-hostile",
    "object": "chat.completion",
    "created": 0,
    "model": "tiny",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


def mode_of(body: dict[str, Any]) -> str:
    messages = body.get("messages") or [{}]
    content = messages[0].get("content") if isinstance(messages[0], dict) else None
    return content if content in MODES or content in ENGINE_ANSWER_MODES else OK


class HostileEngine:
    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        body = json.loads(await read_body(receive) or b"{}")
        mode = mode_of(body)
        self.calls[mode] = self.calls.get(mode, 0) + 1
        stream = bool(body.get("stream"))
        if mode == NAN_JSON:
            doc = json.dumps({**_COMPLETION, "usage": {**_COMPLETION["usage"], "x": float("nan")}})
            await _answer(send, 200, b"application/json", doc.encode())
        elif mode == REDIRECT:
            error = {"error": {"message": "moved", "type": "invalid_request_error", "code": 302}}
            await _answer(
                send,
                302,
                b"application/json",
                json.dumps(error).encode(),
                [(b"location", b"http://elsewhere.invalid/")],
            )
        elif mode == TEAPOT:
            await _answer(send, 418, b"text/plain", b"I'm a teapot")
        elif mode == BAD_REQUEST:
            refusal: dict[str, Any] = {
                "object": "error",
                "message": "This model's maximum context length is 8 tokens.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
            await _answer(send, 400, b"application/json", json.dumps(refusal).encode())
        elif mode == HUGE_BODY and not stream:
            text = "x" * HUGE_BYTES
            doc = json.dumps({**_COMPLETION, "choices": [{"index": 0, "text": text}]})
            await _answer(send, 200, b"application/json", doc.encode())
        elif mode == HUGE_EVENT or (mode == HUGE_BODY and stream):
            event = b"data: " + json.dumps({**_CHUNK, "pad": "x" * HUGE_BYTES}).encode()
            await _answer(send, 200, b"text/event-stream", event + b"\n\ndata: [DONE]\n\n")
        elif mode == ERROR_EVENT:
            events = [
                b"data: " + json.dumps(_CHUNK).encode() + b"\n\n",
                b'data: {"error": {"type": "x", "code": 500}}\n\n',
                b"data: [DONE]\n\n",
            ]
            await _answer(send, 200, b"text/event-stream", b"".join(events))
        elif mode == GARBAGE_STREAM or stream:
            events = (
                [b"data: {not json\n\n", b"data: [1, 2]\n\n", b"data: [DONE]\n\n"]
                if mode == GARBAGE_STREAM
                else [b"data: " + json.dumps(_CHUNK).encode() + b"\n\n", b"data: [DONE]\n\n"]
            )
            await _answer(send, 200, b"text/event-stream", b"".join(events))
        else:
            await _answer(send, 200, b"application/json", json.dumps(_COMPLETION).encode())


async def _answer(
    send: Send,
    status: int,
    content_type: bytes,
    body: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    )
    await send({"type": "http.response.body", "body": body})
