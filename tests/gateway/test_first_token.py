"""Before the first token: timeouts, engines that give up, clients that leave.

Fault injection: a real HTTP peer that accepts a streamed request (200 and
event-stream headers at once, as vLLM does) and then stalls or ends the stream
without a token. A real vLLM cannot be made to do either on purpose.
"""

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import GatewayServer, run_gateway, serve_app

MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]
CHAT = {"model": "tiny", "messages": MESSAGES, "stream": True}
AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}
TIMEOUT_S = 0.3


class Engine:
    """Accepts every streamed request, then stalls (`stall_s`) or ends without a token."""

    def __init__(self, stall_s: float | None) -> None:
        self.stall_s = stall_s
        self.abandoned = threading.Event()  # the gateway dropped a stalled request
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self.chat)

    async def chat(self, request: Request) -> StreamingResponse:
        return StreamingResponse(self.events(), media_type="text/event-stream")

    async def events(self) -> AsyncIterator[bytes]:
        if self.stall_s is None:
            return
        try:
            await asyncio.sleep(self.stall_s)
        except asyncio.CancelledError:
            self.abandoned.set()
            raise
        yield b"data: [DONE]\n\n"


@contextmanager
def gateway_before(engine: Engine, tmp_path: Path, **settings: Any) -> Iterator[GatewayServer]:
    with serve_app(engine.app) as url:
        snapshot = make_snapshot(spec_urls=[], baseline_urls=[url])
        settings = {"first_token_timeout_s": TIMEOUT_S} | settings
        with run_gateway(tmp_path, snapshot, **settings) as gw:
            yield gw


def stream_events(gw: GatewayServer) -> tuple[httpx.Response, list[dict[str, Any]], float]:
    started = time.monotonic()
    with httpx.stream("POST", gw.base_url + "/v1/chat/completions", json=CHAT, headers=AUTH) as r:
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    events = [json.loads(line.removeprefix("data: ")) for line in lines]
    return r, events, time.monotonic() - started


def test_first_token_timeout_is_an_error_event_after_the_headers(tmp_path: Path) -> None:
    with gateway_before(Engine(stall_s=5.0), tmp_path) as gw:
        resp, events, elapsed = stream_events(gw)
        windows = gw.windows()
        # What the openai client makes of it: an APIError while iterating.
        client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=TENANT_KEY, max_retries=0)
        stream = client.chat.completions.create(model="tiny", messages=MESSAGES, stream=True)
        with pytest.raises(openai.APIError, match="No first token"):
            list(stream)
    assert resp.status_code == 200
    assert resp.headers["x-specroute-decision"] == "arm=baseline; reason=pool_unavailable"
    assert events == [
        {
            "error": {
                "message": "No first token from the engine in time",
                "type": "timeout_error",
                "code": "first_token_timeout",
            }
        }
    ]
    assert TIMEOUT_S <= elapsed < 3.0
    assert [(w.requests, w.errors, w.cancellations) for w in windows] == [(1, 1, 0)]


def test_held_headers_make_the_first_token_timeout_a_504(tmp_path: Path) -> None:
    engine = Engine(stall_s=5.0)
    with gateway_before(engine, tmp_path, hold_stream_headers=True) as gw:
        resp = httpx.post(gw.base_url + "/v1/chat/completions", json=CHAT, headers=AUTH)
        windows = gw.windows()
        assert engine.abandoned.wait(5.0)  # the stalled engine request was dropped
    assert resp.status_code == 504
    assert resp.json()["error"]["code"] == "first_token_timeout"
    assert resp.headers["x-specroute-decision"] == "arm=baseline; reason=pool_unavailable"
    assert [(w.requests, w.errors) for w in windows] == [(1, 1)]


@pytest.mark.parametrize("hold", [False, True])
def test_engine_ending_the_stream_without_a_token(tmp_path: Path, hold: bool) -> None:
    with gateway_before(Engine(stall_s=None), tmp_path, hold_stream_headers=hold) as gw:
        resp, events, _ = stream_events(gw)
        windows = gw.windows()
    if hold:
        assert resp.status_code == 502
    else:
        assert resp.status_code == 200
        assert [e["error"]["code"] for e in events] == ["stream_broken"]
    assert [(w.requests, w.errors) for w in windows] == [(1, 1)]


@pytest.mark.parametrize("hold", [False, True])
def test_client_leaving_before_the_first_token_abandons_the_engine_request(
    tmp_path: Path, hold: bool
) -> None:
    engine = Engine(stall_s=30.0)
    with gateway_before(engine, tmp_path, hold_stream_headers=hold, first_token_timeout_s=60) as gw:
        with (
            pytest.raises(httpx.ReadTimeout),
            httpx.stream(
                "POST", gw.base_url + "/v1/chat/completions", json=CHAT, headers=AUTH, timeout=0.5
            ) as r,
        ):
            r.read()
        left = time.monotonic()
        assert engine.abandoned.wait(5.0)
        abandoned_after = time.monotonic() - left
        windows = gw.windows()
    assert abandoned_after < 2.0
    assert [(w.requests, w.errors, w.cancellations) for w in windows] == [(1, 0, 1)]
