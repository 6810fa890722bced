"""A worker that accepts the request and then goes silent (what a partitioned host or a
hung engine looks like from the gateway): the stream is retried once on the pool's
other worker within the response-header timeout, and the silent one's breaker counts it.

The silent engine is a real TCP server that accepts connections and reads what is
sent, and never answers: a real fault, no mock.
"""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from engine.fake import FakeUpstream
from gateway.routing.breaker import BreakerState
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import GatewayServer, run_gateway, serve_app

AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True}
SILENT_S = 0.4  # the response-header timeout under test
MARGIN_S = 1.0  # the healthy engine's whole stream, on a busy machine


@dataclass
class SilentEngine:
    url: str
    accepted: int = 0
    received: list[bytes] = field(default_factory=list)


@contextmanager
def silent_engine() -> Iterator[SilentEngine]:
    listener = socket.create_server(("127.0.0.1", 0))
    engine = SilentEngine(url=f"http://127.0.0.1:{listener.getsockname()[1]}")
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            engine.accepted += 1
            held.append(conn)
            conn.settimeout(1.0)
            try:
                engine.received.append(conn.recv(65536))  # read the request, answer nothing
            except TimeoutError:
                engine.received.append(b"")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield engine
    finally:
        stop.set()
        thread.join(2.0)
        for conn in held:
            conn.close()
        listener.close()


def stream(gw: GatewayServer) -> tuple[httpx.Response, str, float]:
    started = time.monotonic()
    with httpx.stream(
        "POST", gw.base_url + "/v1/chat/completions", json=CHAT, headers=AUTH, timeout=20.0
    ) as r:
        text = r.read().decode()
    return r, text, time.monotonic() - started


def breaker_state(gw: GatewayServer, url: str) -> BreakerState:
    snapshot = gw.state.store.snapshot
    assert snapshot is not None
    worker = next(w for p in snapshot.pools for w in p.workers if w.endpoint_url == url)
    return gw.state.balancer.breaker(worker).state


def test_a_silent_worker_is_routed_around_within_the_header_timeout(tmp_path: Path) -> None:
    healthy = FakeUpstream(tokens=4, interval_s=0.005, model="tiny")
    with serve_app(healthy) as healthy_url, silent_engine() as silent:
        snapshot = make_snapshot(
            spec_urls=[], baseline_urls=[silent.url, healthy_url], with_rollout=False
        )
        with run_gateway(
            tmp_path,
            snapshot,
            response_header_timeout_s=SILENT_S,
            first_token_timeout_s=30.0,
            breaker_failure_threshold=1,
        ) as gw:
            # Equal loads rotate: of two requests in a row, one goes to the silent worker
            # first. Both are served by the healthy one.
            results = [stream(gw) for _ in range(2)]
            assert [r.status_code for r, _, _ in results] == [200, 200]
            for _, text, elapsed in results:
                assert text.count('"content":" tok"') == 4 and "[DONE]" in text, text
                assert elapsed < SILENT_S + MARGIN_S, elapsed
            slow = [elapsed for _, _, elapsed in results if elapsed >= SILENT_S]
            assert len(slow) == 1, results
            # The silent worker got the request once, and its breaker opened on it
            # (threshold 1): the second request never went there.
            assert silent.accepted == 1
            assert silent.received[0].startswith(b"POST /v1/chat/completions HTTP/1.1")
            assert breaker_state(gw, silent.url) is BreakerState.OPEN
            assert breaker_state(gw, healthy_url) is BreakerState.CLOSED
            windows = gw.windows(requests=2)
    assert sum(w.requests for w in windows) == 2 and sum(w.errors for w in windows) == 0


def test_two_silent_workers_end_in_a_typed_504_after_one_retry(tmp_path: Path) -> None:
    with silent_engine() as a, silent_engine() as b, silent_engine() as c:
        snapshot = make_snapshot(
            spec_urls=[], baseline_urls=[a.url, b.url, c.url], with_rollout=False
        )
        with run_gateway(tmp_path, snapshot, response_header_timeout_s=SILENT_S) as gw:
            r, text, elapsed = stream(gw)
            assert r.status_code == 504, text
            error = r.json()["error"]
            assert error["code"] == "engine_unresponsive", error
            # Retried once: two silent workers tried, each for one timeout; the third untried.
            assert 2 * SILENT_S <= elapsed < 2 * SILENT_S + MARGIN_S, elapsed
            assert sorted(e.accepted for e in (a, b, c)) == [0, 1, 1]
