"""Flusher against a real HTTP peer that plays control's telemetry endpoint.

The peer follows the contract (bearer token, TelemetryBatch body, dedupe by
(gateway_id, window_start), TelemetryAck) and records what it received; control
outages are a port nobody listens on.
"""

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest
import pytest_asyncio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.metrics import GatewayMetrics
from gateway.telemetry import RequestRecord, TelemetryAggregator, TelemetryFlusher
from specwire import TelemetryAck, TelemetryBatch
from tests.gateway.records import make_record

TOKEN = "internal-test-token"
T0 = 1_700_000_000.0


@dataclass
class ControlPeer:
    url: str
    received: list[TelemetryBatch] = field(default_factory=list)
    stored: set[tuple[str, float]] = field(default_factory=set)
    fail_next: list[int] = field(default_factory=list)  # statuses to answer before accepting
    attempts: int = 0
    collide_windows: bool = False  # store only one window per batch, as a too-coarse key would


def rec(finished_at: float, **kw: object) -> RequestRecord:
    return make_record(finished_at=finished_at, **kw)


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# NOTE: function loop scope: the peer must run on the test's own event loop.
@pytest_asyncio.fixture(loop_scope="function")
async def peer() -> AsyncIterator[ControlPeer]:
    state = ControlPeer(url="")

    async def telemetry(request: Request) -> JSONResponse:
        state.attempts += 1
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return JSONResponse({"error": {"message": "bad token", "type": "auth"}}, 401)
        if state.fail_next:
            return JSONResponse({"error": {"message": "down", "type": "x"}}, state.fail_next.pop(0))
        batch = TelemetryBatch.model_validate_json(await request.body())
        key = (batch.gateway_id, batch.window_start.timestamp())
        state.received.append(batch)
        if key in state.stored:
            return JSONResponse(TelemetryAck(stored=0, duplicates=len(batch.windows)).model_dump())
        state.stored.add(key)
        stored = 1 if state.collide_windows else len(batch.windows)
        ack = TelemetryAck(stored=stored, duplicates=len(batch.windows) - stored)
        return JSONResponse(ack.model_dump())

    app = Starlette(routes=[Route("/internal/v1/telemetry", telemetry, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    state.url = f"http://127.0.0.1:{port}"
    yield state
    server.should_exit = True
    await task


@pytest_asyncio.fixture(loop_scope="function")
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as c:
        yield c


def fill(agg: TelemetryAggregator, windows: int, per_window: int = 2) -> None:
    for i in range(windows):
        for j in range(per_window):
            agg.record(rec(T0 + 10 * i + j))


async def test_delivers_one_batch_per_closed_window_with_the_bearer_token(
    peer: ControlPeer, client: httpx.AsyncClient
) -> None:
    agg = TelemetryAggregator("gw-a", window_seconds=10, max_pending_windows=16)
    metrics = GatewayMetrics(top_k_segments=4)
    flusher = TelemetryFlusher(agg, client, peer.url + "/", TOKEN, 0.05, metrics=metrics)
    fill(agg, windows=3)
    agg.record(rec(T0 + 35))  # window [T0+30, T0+40) still open at T0+31
    assert flusher.collect(T0 + 31) == 3
    assert await flusher.send_pending() is True
    assert [b.window_start.timestamp() for b in peer.received] == [T0, T0 + 10, T0 + 20]
    assert all(b.gateway_id == "gw-a" and b.windows[0].requests == 2 for b in peer.received)
    assert flusher.flushed == 3 and flusher.pending == 0
    body, _ = metrics.render()
    assert b"specroute_gateway_telemetry_batches_flushed_total 3.0" in body

    await flusher.flush_all()  # shutdown sends the open window too
    assert peer.received[-1].window_start.timestamp() == T0 + 30
    assert peer.received[-1].windows[0].requests == 1


async def test_run_loop_flushes_in_the_background(
    peer: ControlPeer, client: httpx.AsyncClient
) -> None:
    agg = TelemetryAggregator("gw-a", window_seconds=1, max_pending_windows=16)
    flusher = TelemetryFlusher(agg, client, peer.url, TOKEN, interval_s=0.05)
    agg.record(rec(T0))  # a window that closed long ago
    task = asyncio.create_task(flusher.run())
    try:
        async with asyncio.timeout(5):
            while not peer.received:
                await asyncio.sleep(0.02)
    finally:
        task.cancel()
    assert peer.received[0].windows[0].requests == 1


async def test_retries_server_errors_and_control_dedupes_the_resend(
    peer: ControlPeer, client: httpx.AsyncClient
) -> None:
    agg = TelemetryAggregator("gw-a", window_seconds=10, max_pending_windows=16)
    flusher = TelemetryFlusher(agg, client, peer.url, TOKEN, interval_s=0.01)
    fill(agg, windows=2)
    flusher.collect(T0 + 100)
    peer.fail_next = [503, 500]
    assert await flusher.send_pending() is False
    assert flusher.consecutive_failures == 1 and flusher.pending == 2
    assert await flusher.send_pending() is False
    assert flusher.consecutive_failures == 2
    assert await flusher.send_pending() is True
    assert flusher.consecutive_failures == 0 and flusher.flushed == 2
    assert [b.window_start.timestamp() for b in peer.received] == [T0, T0 + 10]
    assert peer.attempts == 4


async def test_a_rejected_batch_is_dropped_and_does_not_block_the_rest(
    peer: ControlPeer, client: httpx.AsyncClient
) -> None:
    agg = TelemetryAggregator("gw-a", window_seconds=10, max_pending_windows=16)
    metrics = GatewayMetrics(top_k_segments=4)
    flusher = TelemetryFlusher(agg, client, peer.url, TOKEN, 0.01, metrics=metrics)
    fill(agg, windows=2)
    flusher.collect(T0 + 100)
    peer.fail_next = [422]
    assert await flusher.send_pending() is True
    assert flusher.dropped["rejected"] == 1
    assert [b.window_start.timestamp() for b in peer.received] == [T0 + 10]
    body, _ = metrics.render()
    assert b'specroute_gateway_telemetry_batches_dropped_total{reason="rejected"} 1.0' in body


async def test_a_wrong_token_is_retried_not_dropped(
    peer: ControlPeer, client: httpx.AsyncClient
) -> None:
    agg = TelemetryAggregator("gw-a", window_seconds=10, max_pending_windows=16)
    flusher = TelemetryFlusher(agg, client, peer.url, "wrong", 0.01)
    fill(agg, windows=1)
    flusher.collect(T0 + 100)
    assert await flusher.send_pending() is False
    assert flusher.pending == 1 and flusher.dropped["rejected"] == 0


async def test_control_outage_keeps_memory_bounded_then_recovers(
    peer: ControlPeer, client: httpx.AsyncClient
) -> None:
    agg = TelemetryAggregator("gw-a", window_seconds=10, max_pending_windows=4)
    metrics = GatewayMetrics(top_k_segments=4)
    flusher = TelemetryFlusher(agg, client, dead_url(), TOKEN, 0.01, metrics=metrics)
    for i in range(10):  # ten windows close while control is unreachable
        agg.record(rec(T0 + 10 * i))
        flusher.collect(T0 + 10 * i + 10)
        assert await flusher.send_pending() is False
        assert flusher.pending <= 4
    assert flusher.consecutive_failures == 10
    assert flusher.dropped["overflow"] == 6
    body, _ = metrics.render()
    assert b'specroute_gateway_telemetry_batches_dropped_total{reason="overflow"} 6.0' in body
    assert b"specroute_gateway_telemetry_batches_pending 4.0" in body

    flusher.url = peer.url + "/internal/v1/telemetry"  # control is back
    assert await flusher.send_pending() is True
    # The newest windows survive, oldest first.
    assert [b.window_start.timestamp() for b in peer.received] == [
        T0 + 10 * i for i in (6, 7, 8, 9)
    ]


def test_backoff_grows_exponentially_with_jitter_and_a_ceiling() -> None:
    agg = TelemetryAggregator("gw-a", window_seconds=10, max_pending_windows=4)
    flusher = TelemetryFlusher(agg, httpx.AsyncClient(), "http://x", TOKEN, 1.0, max_backoff_s=8)
    assert flusher.next_delay() == 1.0
    for failures, ceiling in ((1, 2.0), (2, 4.0), (3, 8.0), (4, 8.0), (30, 8.0)):
        flusher.consecutive_failures = failures
        delays = [flusher.next_delay() for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert max(delays) - min(delays) > ceiling / 10  # jittered, not lockstep


async def test_shutdown_with_control_down_gives_up_by_the_deadline(
    client: httpx.AsyncClient,
) -> None:
    agg = TelemetryAggregator("gw-a", window_seconds=10, max_pending_windows=4)
    flusher = TelemetryFlusher(agg, client, dead_url(), TOKEN, 0.01)
    fill(agg, windows=2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await flusher.flush_all(deadline_s=0.5)
    assert loop.time() - started < 2.0
    assert flusher.dropped["shutdown"] == 2 and flusher.pending == 0


async def test_a_partly_stored_first_delivery_is_counted_and_logged(
    peer: ControlPeer, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    agg = TelemetryAggregator("gw-a", window_seconds=10, max_pending_windows=16)
    flusher = TelemetryFlusher(agg, client, peer.url, TOKEN, 0.01)
    agg.record(rec(T0 + 1, rollout_id=3))
    agg.record(rec(T0 + 2, rollout_id=4))  # same segment/arm/pair, another rollout
    flusher.collect(T0 + 10)
    peer.collide_windows = True
    assert await flusher.send_pending() is True
    assert flusher.partially_stored == 1
    assert "stored 1 of 2 windows" in caplog.text
