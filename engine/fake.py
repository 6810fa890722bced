"""A fake OpenAI engine: fixed tokens at a fixed pace, no model (`specroute engine fake`).

Streams a fixed number of tokens at a fixed pace as Server-Sent Events, for
chat and text completions, shaped like vLLM's output (final usage chunk with
``metrics.speculative_decoding`` when usage is asked for), so a gateway in front
of it does its real per-chunk work. A raw ASGI app: no framework cost on the
engine side. The gateway's tests, the hostile-input suite and the benchmarks
(gateway overhead, the fleet run) all stand it in for an engine; so can a
deployment check of a gateway without a GPU. It also answers what an engine
agent probes (/health, /metrics, /version), so a real agent can heartbeat it.

    specroute engine fake --port 9100 --tokens 16 --interval-ms 5
    python -m engine.fake --port 9100 --tokens 16 --interval-ms 5
"""

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
JSON_HEADERS = [(b"content-type", b"application/json")]
PROMPT_TOKENS = 12
# What /version answers (vLLM's shape); an agent reports it in its engine build.
FAKE_ENGINE_VERSION = "0.32.0+fake"
# An idle engine's gauges, in the Prometheus text vLLM's /metrics serves.
IDLE_METRICS = b"vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"


class FakeUpstream:
    def __init__(self, tokens: int, interval_s: float, model: str = "bench-model") -> None:
        self.tokens = tokens
        self.interval_s = interval_s
        self.model = model
        self._chunks = {kind: self._encode_token_chunk(kind) for kind in ("chat", "text")}

    def _encode_token_chunk(self, kind: str) -> bytes:
        if kind == "chat":
            doc: dict[str, Any] = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": self.model,
                "choices": [{"index": 0, "delta": {"content": " tok"}, "finish_reason": None}],
            }
        else:
            doc = {
                "id": "cmpl-fake",
                "object": "text_completion",
                "created": 0,
                "model": self.model,
                "choices": [{"index": 0, "text": " tok", "finish_reason": None}],
            }
        return b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n"

    def _final_chunks(self, kind: str, include_usage: bool) -> bytes:
        obj = "chat.completion.chunk" if kind == "chat" else "text_completion"
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        choice["delta" if kind == "chat" else "text"] = {} if kind == "chat" else ""
        out = [
            {"id": "fake", "object": obj, "created": 0, "model": self.model, "choices": [choice]}
        ]
        if include_usage:
            out.append(
                {
                    "id": "fake",
                    "object": obj,
                    "created": 0,
                    "model": self.model,
                    "choices": [],
                    "usage": self._usage(),
                    "metrics": self._spec_metrics(),
                }
            )
        body = b"".join(b"data: " + json.dumps(d).encode() + b"\n\n" for d in out)
        return body + b"data: [DONE]\n\n"

    def _usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": self.tokens,
            "total_tokens": PROMPT_TOKENS + self.tokens,
        }

    def _spec_metrics(self) -> dict[str, Any]:
        steps = max(self.tokens // 2, 1)
        return {
            "speculative_decoding": {
                "num_spec_steps": steps,
                "num_draft_tokens": 3 * steps,
                "num_accepted_draft_tokens": steps,
                "acceptance_histogram": [steps // 2, steps - steps // 2, 0, 0],
            }
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                event = (await receive())["type"]
                if event == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif event == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        path = scope["path"]
        if scope["method"] == "GET":
            if path in ("/health", "/v1/models"):
                body = {"object": "list", "data": [{"id": self.model, "object": "model"}]}
                await respond(send, 200, JSON_HEADERS, json.dumps(body).encode())
            elif path == "/version":
                version = json.dumps({"version": FAKE_ENGINE_VERSION}).encode()
                await respond(send, 200, JSON_HEADERS, version)
            elif path == "/metrics":
                await respond(send, 200, [(b"content-type", b"text/plain")], IDLE_METRICS)
            else:
                await respond(send, 404, JSON_HEADERS, b'{"error":"not found"}')
            return
        kind = {"/v1/chat/completions": "chat", "/v1/completions": "text"}.get(path)
        if kind is None:
            await respond(send, 404, JSON_HEADERS, b'{"error":"not found"}')
            return
        req = json.loads(await read_body(receive) or b"{}")
        if req.get("stream"):
            include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
            await self._stream(send, receive, kind, include_usage)
        else:
            await asyncio.sleep(self.interval_s * self.tokens)
            await respond(send, 200, JSON_HEADERS, self._full_body(kind))

    async def _stream(self, send: Send, receive: Receive, kind: str, include_usage: bool) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        chunk = self._chunks[kind]
        # NOTE: absolute deadlines, so the pace does not drift with event-loop latency:
        # both benchmark modes then see the same token schedule.
        start = time.monotonic()
        for i in range(self.tokens):
            delay = start + (i + 1) * self.interval_s - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        final = self._final_chunks(kind, include_usage)
        await send({"type": "http.response.body", "body": final, "more_body": False})

    def _full_body(self, kind: str) -> bytes:
        text = " tok" * self.tokens
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if kind == "chat":
            choice["message"] = {"role": "assistant", "content": text}
            obj = "chat.completion"
        else:
            choice["text"] = text
            obj = "text_completion"
        doc = {
            "id": "fake",
            "object": obj,
            "created": 0,
            "model": self.model,
            "choices": [choice],
            "usage": self._usage(),
            "metrics": self._spec_metrics(),
        }
        return json.dumps(doc).encode()


async def read_body(receive: Receive) -> bytes:
    """The whole request body, however many messages it came in."""
    raw = bytearray()
    while True:
        msg = await receive()
        raw += msg.get("body", b"")
        if not msg.get("more_body"):
            return bytes(raw)


async def respond(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def serve(app: FakeUpstream, host: str, port: int) -> None:
    """Run a fake upstream until stopped: uvloop and httptools, no access log, a deep
    backlog, so the fake is never the bottleneck of what it stands in front of."""
    import uvicorn

    uvicorn.run(
        app,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        backlog=4096,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9100)
    p.add_argument("--tokens", type=int, default=16, help="tokens per response")
    p.add_argument("--interval-ms", type=float, default=5.0, help="gap before each token")
    p.add_argument("--model", default="bench-model")
    a = p.parse_args()
    serve(FakeUpstream(a.tokens, a.interval_ms / 1000.0, a.model), a.host, a.port)


if __name__ == "__main__":
    main()
