"""A fake OpenAI engine: fixed tokens at a fixed pace, no model (`specroute engine fake`).

Streams a fixed number of tokens at a fixed pace as Server-Sent Events, for
chat and text completions, shaped like vLLM's output (final usage chunk with
``metrics.speculative_decoding`` when usage is asked for), so a gateway in front
of it does its real per-chunk work. A raw ASGI app: no framework cost on the
engine side. The gateway's tests, the hostile-input suite and the benchmarks
(gateway overhead, the fleet run) all stand it in for an engine; so can a
deployment check of a gateway without a GPU. It also answers what an engine
agent probes (/health, /metrics, /version), so a real agent can heartbeat it.

Two switches stand it in for how a vLLM server was started: `per_request_metrics`
False leaves `metrics` out of the final chunk (vLLM without
`--per-request-spec-decode-metrics`), and `spec_counters` True adds a speculating
server's cumulative `vllm:spec_decode_*` and `vllm:generation_tokens` counters to
/metrics, counted over every response it finished (k = 3, the same acceptance
histogram as the per-request metrics).

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
FAKE_K = 3  # draft tokens per step in the fake's speculative metrics


class FakeUpstream:
    def __init__(
        self,
        tokens: int,
        interval_s: float,
        model: str = "bench-model",
        *,
        per_request_metrics: bool = True,
        spec_counters: bool = False,
    ) -> None:
        self.tokens = tokens
        self.interval_s = interval_s
        self.model = model
        self.per_request_metrics = per_request_metrics
        self.spec_counters = spec_counters
        # Cumulative, as vLLM's counters: steps, draft tokens, accepted tokens, accepted
        # per position (0-based), generated tokens.
        self.drafts = self.draft_tokens = self.accepted = self.generated = 0
        self.accepted_per_position = [0] * FAKE_K
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
            usage: dict[str, Any] = {
                "id": "fake",
                "object": obj,
                "created": 0,
                "model": self.model,
                "choices": [],
                "usage": self._usage(),
            }
            if self.per_request_metrics:
                usage["metrics"] = self._spec_metrics()
            out.append(usage)
        body = b"".join(b"data: " + json.dumps(d).encode() + b"\n\n" for d in out)
        return body + b"data: [DONE]\n\n"

    def _usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": self.tokens,
            "total_tokens": PROMPT_TOKENS + self.tokens,
        }

    def _histogram(self) -> list[int]:
        """[k + 1]: a response's steps that accepted exactly j drafts."""
        steps = max(self.tokens // 2, 1)
        return [steps // 2, steps - steps // 2] + [0] * (FAKE_K - 1)

    def _spec_metrics(self) -> dict[str, Any]:
        steps = max(self.tokens // 2, 1)
        return {
            "speculative_decoding": {
                "num_spec_steps": steps,
                "num_draft_tokens": FAKE_K * steps,
                "num_accepted_draft_tokens": steps,
                "acceptance_histogram": self._histogram(),
            }
        }

    def _count(self) -> None:
        """One response finished: its steps into the cumulative counters."""
        histogram = self._histogram()
        self.drafts += sum(histogram)
        self.draft_tokens += FAKE_K * sum(histogram)
        self.accepted += sum(j * n for j, n in enumerate(histogram))
        for i in range(FAKE_K):
            self.accepted_per_position[i] += sum(histogram[i + 1 :])
        self.generated += self.tokens

    def metrics_body(self) -> bytes:
        """What /metrics serves: the idle gauges, and the counters with spec_counters."""
        if not self.spec_counters:
            return IDLE_METRICS
        lines = [
            "# TYPE vllm:spec_decode_num_drafts counter",
            f'vllm:spec_decode_num_drafts_total{{engine="0"}} {float(self.drafts)}',
            "# TYPE vllm:spec_decode_num_draft_tokens counter",
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {float(self.draft_tokens)}',
            "# TYPE vllm:spec_decode_num_accepted_tokens counter",
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {float(self.accepted)}',
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter",
            *(
                "vllm:spec_decode_num_accepted_tokens_per_pos_total"
                f'{{engine="0",position="{i}"}} {float(n)}'
                for i, n in enumerate(self.accepted_per_position)
            ),
            "# TYPE vllm:generation_tokens counter",
            f'vllm:generation_tokens_total{{engine="0"}} {float(self.generated)}',
        ]
        return IDLE_METRICS + "\n".join(lines).encode() + b"\n"

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
                await respond(send, 200, [(b"content-type", b"text/plain")], self.metrics_body())
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
            self._count()
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
        self._count()
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
        }
        if self.per_request_metrics:
            doc["metrics"] = self._spec_metrics()
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
    p.add_argument(
        "--no-per-request-metrics",
        action="store_true",
        help="no per-request speculative metrics (vLLM without --per-request-spec-decode-metrics)",
    )
    p.add_argument(
        "--spec-counters", action="store_true", help="vllm:spec_decode_* counters on /metrics"
    )
    a = p.parse_args()
    upstream = FakeUpstream(
        a.tokens,
        a.interval_ms / 1000.0,
        a.model,
        per_request_metrics=not a.no_per_request_metrics,
        spec_counters=a.spec_counters,
    )
    serve(upstream, a.host, a.port)


if __name__ == "__main__":
    main()
