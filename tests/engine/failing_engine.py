"""The benchmark's fake upstream, failing the requests whose body holds a marker: with
an error status, or with an error event after one token (what vLLM streams when a
request fails mid-generation). Every other request is the fake's own answer."""

import json
from typing import Literal

from engine.fake import (
    JSON_HEADERS,
    SSE_HEADERS,
    FakeUpstream,
    Message,
    Receive,
    Scope,
    Send,
    read_body,
)

FailMode = Literal["status", "event"]


class FailingEngine:
    def __init__(self, inner: FakeUpstream, marker: str, mode: FailMode) -> None:
        self.inner = inner
        self.marker = marker.encode()
        self.mode = mode
        self.failed = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.inner(scope, receive, send)
            return
        raw = await read_body(receive)
        if self.marker in raw:
            self.failed += 1
            await self._fail(send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}

        await self.inner(scope, replay, send)

    async def _fail(self, send: Send) -> None:
        error = {"message": "CUDA error: an illegal memory access", "code": 500}
        if self.mode == "status":
            body = json.dumps({"error": error}).encode()
            await send({"type": "http.response.start", "status": 500, "headers": JSON_HEADERS})
            await send({"type": "http.response.body", "body": body})
            return
        token = {"choices": [{"index": 0, "delta": {"content": " tok"}, "finish_reason": None}]}
        events = [b"data: " + json.dumps(d).encode() + b"\n\n" for d in (token, {"error": error})]
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await send({"type": "http.response.body", "body": b"".join(events)})
