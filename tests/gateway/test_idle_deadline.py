"""The mid-stream idle timeout, enforced by one deadline per stream (re-armed, not
re-created, per engine event): a stream longer than the timeout whose gaps are all
shorter completes; a stall longer than it ends the stream with a typed error event
and drops the engine's request.

Fault injection: a real HTTP peer that sends a few tokens and then stalls; a real
vLLM cannot be made to stall on purpose.
"""

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from engine.fake import FakeUpstream
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import GatewayServer, run_gateway, serve_app

AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True}
IDLE_S = 0.25


def stream(gw: GatewayServer) -> tuple[list[Any], float]:
    started = time.monotonic()
    with httpx.stream(
        "POST", gw.base_url + "/v1/chat/completions", json=CHAT, headers=AUTH, timeout=10.0
    ) as r:
        assert r.status_code == 200
        lines = [line.removeprefix("data: ") for line in r.iter_lines() if line.startswith("data:")]
    events = [line if line == "[DONE]" else json.loads(line) for line in lines]
    return events, time.monotonic() - started


def test_a_stream_longer_than_the_idle_timeout_with_short_gaps_completes(tmp_path: Path) -> None:
    # 12 tokens 60 ms apart: 0.72 s in all, ~3x the idle timeout, every gap a quarter of it.
    engine = FakeUpstream(tokens=12, interval_s=0.06, model="tiny")
    with serve_app(engine) as url:
        snapshot = make_snapshot(spec_urls=[], baseline_urls=[url])
        with run_gateway(tmp_path, snapshot, idle_timeout_s=IDLE_S) as gw:
            for _ in range(2):  # the second on the pooled connection the first left
                events, elapsed = stream(gw)
                tokens = [e for e in events if e != "[DONE]" and e["choices"]]
                assert [t["choices"][0]["delta"].get("content") for t in tokens[:12]] == [
                    " tok"
                ] * 12
                assert events[-1] == "[DONE]"
                assert not any(e != "[DONE]" and "error" in e for e in events)
                assert elapsed > 2 * IDLE_S
            windows = gw.windows(requests=2)
    # NOTE: the two requests may fall into one telemetry window or two.
    assert sum(w.requests for w in windows) == 2
    assert sum(w.errors for w in windows) == 0


class StallingEngine:
    """Streams `tokens` tokens, then stalls for `stall_s` (noting when it is abandoned)."""

    def __init__(self, tokens: int, stall_s: float) -> None:
        self.tokens = tokens
        self.stall_s = stall_s
        self.abandoned = threading.Event()
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self.chat)

    async def chat(self, request: Request) -> StreamingResponse:
        return StreamingResponse(self.events(), media_type="text/event-stream")

    async def events(self) -> AsyncIterator[bytes]:
        for i in range(self.tokens):
            doc = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "tiny"}
            doc["choices"] = [{"index": 0, "delta": {"content": f"t{i}"}, "finish_reason": None}]
            yield b"data: " + json.dumps(doc).encode() + b"\n\n"
            await asyncio.sleep(0.02)
        try:
            await asyncio.sleep(self.stall_s)
        except asyncio.CancelledError:
            self.abandoned.set()
            raise
        yield b"data: [DONE]\n\n"


def test_a_stall_longer_than_the_idle_timeout_ends_in_a_typed_error(tmp_path: Path) -> None:
    engine = StallingEngine(tokens=3, stall_s=10.0)
    with serve_app(engine.app) as url:
        snapshot = make_snapshot(spec_urls=[], baseline_urls=[url])
        with run_gateway(tmp_path, snapshot, idle_timeout_s=IDLE_S) as gw:
            events, elapsed = stream(gw)
            windows = gw.windows()
            assert engine.abandoned.wait(5.0)  # the engine's request was dropped
    assert [e["choices"][0]["delta"]["content"] for e in events[:3]] == ["t0", "t1", "t2"]
    assert events[-1]["error"]["code"] == "idle_timeout"
    assert events[-1]["error"]["type"] == "timeout_error"
    assert len(events) == 4
    # Three tokens (~0.06 s), then the timeout: well before the engine's 10 s stall.
    assert IDLE_S < elapsed < IDLE_S + 1.5
    assert [(w.requests, w.errors) for w in windows] == [(1, 1)]
