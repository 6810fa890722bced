"""How the gateway treats what third-party clients send at the HTTP level: a client
that leaves while a non-streamed answer is generated, methods other than the
documented ones, a compressed body, a body in UTF-16 or with a byte-order mark."""

import asyncio
import contextlib
import gzip
import json
import socket
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.fake import FakeUpstream
from gateway.quota.memory import InMemoryQuotaLimiter
from specwire import QuotaSpec
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import GatewayServer, run_gateway, serve_app

AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


class DisconnectSeen:
    """An engine (the fake) that notes each request whose connection the gateway drops."""

    def __init__(self, engine: FakeUpstream) -> None:
        self.engine = engine
        self.dropped = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.engine(scope, receive, send)
            return
        body_read = asyncio.Event()

        async def engine_receive() -> Any:
            message = await receive()
            if not message.get("more_body"):
                body_read.set()
            return message

        async def watch() -> None:
            await body_read.wait()
            while (await receive())["type"] != "http.disconnect":
                pass
            self.dropped += 1

        watcher = asyncio.create_task(watch())
        try:
            await self.engine(scope, engine_receive, send)
        finally:
            await asyncio.sleep(0.1)
            watcher.cancel()


@pytest.fixture(scope="module")
def slow(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GatewayServer, DisconnectSeen]]:
    # 300 tokens at 20 ms: a non-streamed answer (headers included) takes 6 s.
    engine = DisconnectSeen(FakeUpstream(300, 0.02, model="tiny"))
    with serve_app(engine) as url:
        snapshot = make_snapshot(spec_urls=[url], baseline_urls=[url])
        snapshot.tenants[0].quota = QuotaSpec(weighted_tokens_per_minute=10_000_000)
        with run_gateway(tmp_path_factory.mktemp("slow"), snapshot) as gw:
            yield gw, engine


def test_a_client_leaving_a_non_streamed_answer_drops_the_engine_request(
    slow: tuple[GatewayServer, DisconnectSeen],
) -> None:
    gw, engine = slow
    host, port = gw.base_url.removeprefix("http://").split(":")
    body = json.dumps(CHAT | {"max_tokens": 300}).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
        f"Authorization: Bearer {TENANT_KEY}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection((host, int(port))) as client:
        client.sendall(head.encode() + body)
        deadline = time.monotonic() + 3.0
        while gw.state.balancer.outstanding("p1-w0") == 0:
            assert time.monotonic() < deadline, "the request never reached the engine"
            time.sleep(0.01)
    left_at = time.monotonic()
    # The engine's answer is 6 s away: the gateway must let go of it well before.
    while gw.state.balancer.outstanding("p1-w0") or engine.dropped == 0:
        assert time.monotonic() - left_at < 2.0, "the engine request outlived its client"
        time.sleep(0.02)
    assert engine.dropped == 1
    windows = gw.windows(1)
    assert (sum(w.requests for w in windows), sum(w.cancellations for w in windows)) == (1, 1)
    # Charged its prompt estimate (the body's bytes / 4), not the 300-token booking.
    quota = gw.state.quota
    assert isinstance(quota, InMemoryQuotaLimiter)
    deadline = time.monotonic() + 2.0
    while quota.used(1) != -(-len(body) // 4):
        assert time.monotonic() < deadline, f"charged {quota.used(1)}"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    with serve_app(FakeUpstream(4, 0.001, model="tiny")) as url:
        snapshot = make_snapshot(spec_urls=[url], baseline_urls=[url])
        with run_gateway(tmp_path_factory.mktemp("gw"), snapshot) as gw:
            yield gw


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/v1/chat/completions", "POST"),
        ("OPTIONS", "/v1/chat/completions", "POST"),
        ("PUT", "/v1/completions", "POST"),
        ("PATCH", "/v1/completions", "POST"),
        ("DELETE", "/v1/models", "GET, HEAD"),
        ("POST", "/v1/models/tiny", "GET, HEAD"),
        ("OPTIONS", "/v1/models/org/tiny", "GET, HEAD"),
    ],
)
def test_a_405_names_the_methods_the_path_takes(
    gateway: GatewayServer, method: str, path: str, allow: str
) -> None:
    resp = httpx.request(method, gateway.base_url + path, headers=AUTH)
    assert resp.status_code == 405
    assert resp.json()["error"]["code"] == "method_not_allowed"
    assert resp.headers["allow"] == allow


@pytest.mark.parametrize("path", ["/v1/models", "/v1/models/tiny"])
def test_head_on_the_models_paths_answers_as_get_without_a_body(
    gateway: GatewayServer, path: str
) -> None:
    got = httpx.get(gateway.base_url + path, headers=AUTH)
    head = httpx.head(gateway.base_url + path, headers=AUTH)
    assert (got.status_code, head.status_code) == (200, 200)
    assert head.content == b""
    assert head.headers["content-type"] == "application/json"
    assert head.headers["content-length"] == str(len(got.content))
    assert httpx.head(gateway.base_url + path).status_code == 401
    assert httpx.head(gateway.base_url + "/v1/models/nope", headers=AUTH).status_code == 404


def test_the_head_routes_stay_out_of_the_openapi_document(gateway: GatewayServer) -> None:
    paths = httpx.get(gateway.base_url + "/openapi.json").json()["paths"]
    assert set(paths["/v1/models"]) == {"get"}
    assert set(paths["/v1/models/{model_id}"]) == {"get"}


def _post_encoded(gw: GatewayServer, content: bytes, encoding: str) -> httpx.Response:
    headers = AUTH | {"content-type": "application/json", "content-encoding": encoding}
    return httpx.post(gw.base_url + "/v1/chat/completions", content=content, headers=headers)


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [("gzip", gzip.compress), ("x-gzip", gzip.compress), ("deflate", zlib.compress)],
)
def test_a_compressed_body_is_read_decompressed(
    gateway: GatewayServer, encoding: str, compress: Any
) -> None:
    resp = _post_encoded(gateway, compress(json.dumps(CHAT).encode()), encoding)
    assert resp.status_code == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"] == " tok" * 4
    # Streamed too: the engine is asked for usage in the decompressed body.
    streamed = _post_encoded(
        gateway, compress(json.dumps(CHAT | {"stream": True}).encode()), encoding
    )
    assert streamed.status_code == 200, streamed.text
    assert streamed.text.count('"content":" tok"') == 4 and "[DONE]" in streamed.text


def test_a_body_in_an_unknown_or_broken_encoding_is_a_typed_refusal(
    gateway: GatewayServer,
) -> None:
    body = json.dumps(CHAT).encode()
    cases = [
        (_post_encoded(gateway, body, "br"), 415, "unsupported_content_encoding"),
        (_post_encoded(gateway, body, "gzip"), 400, "invalid_encoding"),
        (_post_encoded(gateway, gzip.compress(body)[:-12], "gzip"), 400, "invalid_encoding"),
        (_post_encoded(gateway, gzip.compress(body) + b"x", "gzip"), 400, "invalid_encoding"),
    ]
    for resp, status, code in cases:
        assert resp.status_code == status, resp.text
        assert resp.json()["error"]["code"] == code
        assert resp.json()["error"]["type"] == "invalid_request_error"


def test_a_gzip_body_of_several_members_is_read_as_their_concatenation(
    gateway: GatewayServer,
) -> None:
    raw = json.dumps(CHAT).encode()
    members = b"".join(gzip.compress(raw[i : i + 9]) for i in range(0, len(raw), 9))
    assert len(raw) > 9 * 4 and gzip.decompress(members) == raw
    resp = _post_encoded(gateway, members, "gzip")
    assert resp.status_code == 200, resp.text
    assert resp.json()["choices"][0]["message"]["content"] == " tok" * 4
    # Each member under the 1 MiB limit, the two together over it.
    half = b" " * (600 << 10)
    pair = gzip.compress(raw[:-1] + half) + gzip.compress(half + b"}")
    resp = _post_encoded(gateway, pair, "gzip")
    assert resp.status_code == 413 and resp.json()["error"]["code"] == "payload_too_large"
    # Past 64 members (empty ones cost a new inflater each): refused, typed.
    many = gzip.compress(raw) + gzip.compress(b"") * 64
    resp = _post_encoded(gateway, many, "gzip")
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_encoding"
    assert "64 gzip members" in resp.json()["error"]["message"]
    # A deflate (zlib) stream has no members: a second one after it is refused.
    resp = _post_encoded(gateway, zlib.compress(raw) + zlib.compress(b" "), "deflate")
    assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_encoding"


def test_the_size_limit_holds_for_the_decompressed_body(tmp_path: Path) -> None:
    # 2 MiB of spaces compress to ~2 KiB: under the limit on the wire, over it inflated.
    bomb = gzip.compress(json.dumps(CHAT).encode()[:-1] + b" " * (2 << 20) + b"}")
    with run_gateway(
        tmp_path, make_snapshot(spec_urls=[], baseline_urls=[]), max_body_bytes=1 << 20
    ) as gw:
        assert len(bomb) < 1 << 20
        resp = _post_encoded(gw, bomb, "gzip")
    assert resp.status_code == 413
    assert resp.json()["error"]["code"] == "payload_too_large"


@pytest.fixture(scope="module")
def impatient(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    """A gateway that waits 1.5 s for a request body."""
    with serve_app(FakeUpstream(4, 0.001, model="tiny")) as url:
        snapshot = make_snapshot(spec_urls=[url], baseline_urls=[url])
        with run_gateway(
            tmp_path_factory.mktemp("impatient"), snapshot, request_body_timeout_s=1.5
        ) as gw:
            yield gw


def _trickle(gw: GatewayServer, body: bytes, sent: int, every_s: float) -> tuple[bytes, float]:
    """POST `body` on a raw socket, its headers at once, then its first `sent` bytes
    one at a time every `every_s`; the whole answer up to the connection's close, and
    the seconds from the headers to the end of the answer."""
    host, port = gw.base_url.removeprefix("http://").split(":")
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
        f"Authorization: Bearer {TENANT_KEY}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10.0) as client:
        client.sendall(head.encode())
        started = time.monotonic()
        client.setblocking(False)
        answer = b""
        for i in range(sent):
            with contextlib.suppress(BlockingIOError):
                answer += client.recv(65536)
            if answer:
                break
            client.sendall(body[i : i + 1])
            time.sleep(every_s)
        client.setblocking(True)
        while chunk := client.recv(65536):
            answer += chunk
            if b"\r\n\r\n" in answer and _complete(answer):
                break
        # the gateway closes the connection after answering a late body
        if b"connection: close" in answer.lower():
            assert client.recv(65536) == b""
        return answer, time.monotonic() - started


def _complete(answer: bytes) -> bool:
    head, _, content = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            return len(content) >= int(value)
    return False


def _status_and_json(answer: bytes) -> tuple[int, dict[str, Any], str]:
    head, _, content = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(content), head.decode().lower()


@pytest.mark.parametrize("sent", [0, 400], ids=["no-body-byte", "trickled"])
def test_a_body_not_received_in_time_is_a_408_and_a_closed_connection(
    impatient: GatewayServer, sent: int
) -> None:
    impatient.state.aggregator.drain_all()
    body = json.dumps(CHAT).encode() + b" " * 400
    answer, took = _trickle(impatient, body, sent, every_s=0.01)
    status, doc, head = _status_and_json(answer)
    assert status == 408, answer
    assert doc["error"]["code"] == "request_body_timeout"
    assert doc["error"]["type"] == "invalid_request_error"
    assert "connection: close" in head
    assert 1.4 < took < 4.0
    assert impatient.state.body_deadlines.reading == 0
    # Recorded as a refused request, the client's fault: no arm counts it.
    records = [r for b in impatient.state.aggregator.drain_all() for r in b.requests]
    assert [(r.http_status, r.outcome, r.error_code, r.arm) for r in records] == [
        (408, "client_error", "request_body_timeout", None)
    ]
    samples = [
        line
        for line in httpx.get(impatient.base_url + "/metrics").text.splitlines()
        if line.startswith("specroute_gateway_requests_total{")
    ]
    assert not [s for s in samples if 'outcome="error"' in s or 'status="408"' in s], samples


def test_a_slow_sender_within_the_deadline_is_answered(impatient: GatewayServer) -> None:
    body = json.dumps(CHAT).encode()
    assert len(body) * 0.01 < 1.0  # all of it sent in well under the 1.5 s deadline
    answer, _ = _trickle(impatient, body, len(body), every_s=0.01)
    status, doc, _ = _status_and_json(answer)
    assert status == 200, answer
    assert doc["choices"][0]["message"]["content"] == " tok" * 4


class BodiesSeen:
    """An engine (the fake) that keeps the body of each POST it receives."""

    def __init__(self, engine: FakeUpstream) -> None:
        self.engine = engine
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.engine(scope, receive, send)
            return
        chunks: list[bytes] = []

        async def engine_receive() -> Any:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                self.bodies.append(b"".join(chunks))
            return message

        await self.engine(scope, engine_receive, send)


@pytest.fixture(scope="module")
def recording(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GatewayServer, BodiesSeen]]:
    engine = BodiesSeen(FakeUpstream(4, 0.0, model="tiny"))
    with serve_app(engine) as url:
        snapshot = make_snapshot(spec_urls=[url], baseline_urls=[url])
        snapshot.tenants[0].quota = QuotaSpec(weighted_tokens_per_minute=10_000_000)
        with run_gateway(tmp_path_factory.mktemp("recording"), snapshot) as gw:
            yield gw, engine


@pytest.mark.parametrize(
    "encode",
    [
        lambda text: b"\xef\xbb\xbf" + text.encode(),
        lambda text: text.encode("utf-16-le"),
        lambda text: text.encode("utf-16"),  # with its BOM
        lambda text: text.encode("utf-32-be"),
    ],
    ids=["utf-8-bom", "utf-16-le", "utf-16-bom", "utf-32-be"],
)
@pytest.mark.parametrize("stream", [False, True])
def test_a_body_in_another_unicode_form_reaches_the_engine_as_utf8(
    recording: tuple[GatewayServer, BodiesSeen], encode: Any, stream: bool
) -> None:
    gw, engine = recording
    doc = CHAT | {"messages": [{"role": "user", "content": "héllo ✓"}], "stream": stream}
    resp = httpx.post(
        gw.base_url + "/v1/chat/completions",
        content=encode(json.dumps(doc, ensure_ascii=False)),
        headers=AUTH | {"Content-Type": "application/json"},
    )
    assert resp.status_code == 200, resp.text
    assert resp.text.count(" tok") == 4
    sent = engine.bodies[-1]
    assert not sent.startswith(b"\xef\xbb\xbf")
    received = json.loads(sent.decode("utf-8"))  # strict UTF-8, no BOM
    assert received["messages"] == doc["messages"]
    assert received["max_tokens"] == 4
