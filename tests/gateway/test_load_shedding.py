"""max_concurrent_requests on a real gateway: a completion request over the limit is
a typed 503 `gateway_overloaded` with Retry-After, counted as a refusal, booking no
quota; the slot of every request comes back however it ends; unlimited by default."""

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError
from starlette.types import Message, Scope

from engine.fake import FakeUpstream
from gateway.app import create_app
from gateway.quota.memory import InMemoryQuotaLimiter
from gateway.routes.fastlane import CompletionFastLane
from gateway.settings import GatewaySettings
from gateway.state import GatewayState
from specwire import QuotaSpec
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.scrape import refusals
from tests.gateway.server import GatewayServer, free_port, run_gateway, serve_app

AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}
# 150 tokens at 20 ms: a stream lasts 3 s (the fake keeps a schedule: after a stall
# of the test process, it catches up at once).
CHAT = {
    "model": "tiny",
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 50,
    "stream": True,
}


@pytest.fixture(scope="module")
def engine_url() -> Iterator[str]:
    with serve_app(FakeUpstream(150, 0.02, model="tiny")) as url:
        yield url


@pytest.fixture
def limited(tmp_path: Path, engine_url: str) -> Iterator[GatewayServer]:
    snapshot = make_snapshot(spec_urls=[engine_url], baseline_urls=[engine_url])
    snapshot.tenants[0].quota = QuotaSpec(weighted_tokens_per_minute=10_000_000)
    with run_gateway(tmp_path, snapshot, max_concurrent_requests=2) as gw:
        yield gw


def in_flight(gw: GatewayServer) -> int:
    slots = gw.state.slots
    assert slots is not None
    return slots.in_flight


def wait_in_flight(gw: GatewayServer, expected: int, timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while in_flight(gw) != expected:
        assert time.monotonic() < deadline, f"{in_flight(gw)} in flight, not {expected}"
        time.sleep(0.01)


def test_a_request_over_the_limit_is_shed_typed_and_counted(limited: GatewayServer) -> None:
    gw = limited
    quota = gw.state.quota
    assert isinstance(quota, InMemoryQuotaLimiter)
    with contextlib.ExitStack() as stack:
        streams = [
            stack.enter_context(
                stack.enter_context(httpx.Client(base_url=gw.base_url)).stream(
                    "POST", "/v1/chat/completions", json=CHAT, headers=AUTH
                )
            )
            for _ in range(2)
        ]
        assert [s.status_code for s in streams] == [200, 200]
        assert in_flight(gw) == 2
        booked = quota.used(1)
        assert booked > 0
        for path in ("/v1/chat/completions", "/v1/completions"):
            for streamed in (True, False):
                shed = httpx.post(
                    gw.base_url + path,
                    json=CHAT | {"stream": streamed, "prompt": "hi"},
                    headers=AUTH,
                )
                assert shed.status_code == 503
                assert shed.headers["retry-after"] == "1"
                assert shed.headers["x-request-id"]
                assert shed.json()["error"]["code"] == "gateway_overloaded"
                assert shed.json()["error"]["type"] == "service_unavailable"
        # No quota booked for the shed ones, and the limit held.
        assert quota.used(1) == booked
        assert in_flight(gw) == 2
        assert refusals(gw).get(("503", "gateway_overloaded")) == 4
        # The ops and models endpoints are never limited.
        for path in ("/healthz", "/readyz", "/metrics", "/v1/models"):
            assert httpx.get(gw.base_url + path, headers=AUTH).status_code == 200, path
        for stream in streams:
            assert b"data: [DONE]" in b"".join(stream.iter_bytes())
    wait_in_flight(gw, 0)
    after = httpx.post(
        gw.base_url + "/v1/chat/completions", json=CHAT | {"stream": False}, headers=AUTH
    )
    assert after.status_code == 200
    assert after.json()["choices"][0]["message"]["content"]
    assert in_flight(gw) == 0
    assert refusals(gw).get(("503", "gateway_overloaded")) == 4


def test_a_client_leaving_mid_stream_frees_its_slot(limited: GatewayServer) -> None:
    gw = limited
    for _ in range(3):  # more times than the limit: a leaked slot would shed the last
        with (
            httpx.Client(base_url=gw.base_url) as client,
            client.stream("POST", "/v1/chat/completions", json=CHAT, headers=AUTH) as response,
        ):
            assert response.status_code == 200
            # NOTE: the iterator is kept: dropped, it closes the response at once, and
            # the gateway may see the client leave before the count below is read.
            chunks = response.iter_raw()
            first = next(chunks)
            assert in_flight(gw) == 1, first
        wait_in_flight(gw, 0)
    assert ("503", "gateway_overloaded") not in refusals(gw)


def test_a_client_leaving_a_non_streamed_answer_frees_its_slot(limited: GatewayServer) -> None:
    gw = limited
    host, port = gw.base_url.removeprefix("http://").split(":")
    body = json.dumps(CHAT | {"stream": False}).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
        f"Authorization: Bearer {TENANT_KEY}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection((host, int(port))) as client:
        client.sendall(head.encode() + body)
        wait_in_flight(gw, 1)
    wait_in_flight(gw, 0)


def test_refused_and_failed_requests_free_their_slots(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens: every engine call fails
    snapshot = make_snapshot(spec_urls=[dead], baseline_urls=[dead])
    with run_gateway(tmp_path, snapshot, max_concurrent_requests=1) as gw:
        url = gw.base_url + "/v1/chat/completions"
        for _ in range(3):
            failed = httpx.post(url, json=CHAT, headers=AUTH)
            # Unreachable until the breaker opens, then no healthy worker.
            assert failed.json()["error"]["code"] in ("engine_unreachable", "no_healthy_worker")
            bad = httpx.post(url, content=b"{", headers=AUTH)
            assert bad.json()["error"]["code"] == "invalid_json"
            unknown = httpx.post(url, json=CHAT, headers={"Authorization": "Bearer nope"})
            assert unknown.status_code == 401
        assert in_flight(gw) == 0
        assert ("503", "gateway_overloaded") not in refusals(gw)


def test_unlimited_by_default_admits_many_at_once(tmp_path: Path, engine_url: str) -> None:
    snapshot = make_snapshot(spec_urls=[engine_url], baseline_urls=[engine_url])
    with run_gateway(tmp_path, snapshot) as gw:
        assert gw.state.slots is None
        with contextlib.ExitStack() as stack:
            streams = [
                stack.enter_context(
                    stack.enter_context(httpx.Client(base_url=gw.base_url)).stream(
                        "POST", "/v1/chat/completions", json=CHAT, headers=AUTH
                    )
                )
                for _ in range(8)
            ]
            assert [s.status_code for s in streams] == [200] * 8
            assert gw.state.balancer.outstanding("p1-w0") == 8
            for stream in streams:
                assert b"data: [DONE]" in b"".join(stream.iter_bytes())


def test_a_negative_limit_is_refused_at_start() -> None:
    with pytest.raises(ValidationError, match="max_concurrent_requests"):
        GatewaySettings(max_concurrent_requests=-1)


async def test_a_cancelled_request_frees_its_slot(tmp_path: Path) -> None:
    # NOTE: driven as ASGI, since cancelling a request's task (what `serve` does to
    # requests still running after the shutdown grace) cannot be timed from a client.
    # The client is one that never sends its body: the request waits in intake.
    settings = GatewaySettings(
        snapshot_file=tmp_path / "unused.json", gateway_id="test", max_concurrent_requests=1
    )
    app = create_app(settings)
    state: GatewayState = app.state.gateway
    state.store.replace(make_snapshot(spec_urls=[], baseline_urls=[]), etag=None, confirmed=True)
    lane = app.build_middleware_stack()
    assert isinstance(lane, CompletionFastLane)
    never = asyncio.Event()
    sent: list[Message] = []

    async def receive() -> Message:
        await never.wait()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "scheme": "http",
        "headers": [
            (b"authorization", f"Bearer {TENANT_KEY}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", b"100"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "app": app,
        "state": {},
    }
    task = asyncio.create_task(lane(scope, receive, send))
    slots = state.slots
    assert slots is not None
    for _ in range(100):
        await asyncio.sleep(0.01)
        if slots.in_flight:
            break
    assert slots.in_flight == 1
    # A second request meanwhile is shed.
    await lane(scope, receive, send)
    assert sent[0]["status"] == 503
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert slots.in_flight == 0
