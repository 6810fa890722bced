"""The gateway's engine HTTP client against real sockets: framing, pooling and faults.

Each test runs a raw asyncio TCP server that answers as scripted (what a real
engine sends, and the faults real engines produce: closing mid-answer, closing
an idle keep-alive connection, sending garbage) and checks what the client
returns or raises, and what reached the server.
"""

import asyncio
import json
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gateway.proxy.engine_http import (
    _HIGH_WATER,
    EngineBodyTooLarge,
    EngineClient,
    EngineConnectError,
    EngineDisconnected,
    EngineProtocolError,
    EngineUnresponsive,
)
from tests.fixtures.tls import self_signed
from tests.gateway.server import dead_url

HEADERS = {"content-type": "application/json", "x-request-id": "req-1"}


@dataclass
class Request:
    line: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    url: str
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    closed_by_peer: asyncio.Event = field(default_factory=asyncio.Event)


Reader = asyncio.StreamReader
Writer = asyncio.StreamWriter
Answer = Callable[[Request, Reader, Writer, int], Awaitable[bool]]


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    line, *rest = head.decode("latin-1").split("\r\n")
    headers = {}
    for h in rest:
        if h:
            name, _, value = h.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(line, headers, body)


@asynccontextmanager
async def scripted_server(answer: Answer) -> AsyncIterator[tuple[Server, EngineClient]]:
    """`answer(request, reader, writer, n)` writes a connection's n-th answer; False closes it."""
    server: Server

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.connections += 1
        n = 0
        try:
            while (request := await read_request(reader)) is not None:
                server.requests.append(request)
                if not await answer(request, reader, writer, n):
                    break
                n += 1
            else:
                server.closed_by_peer.set()
        finally:
            writer.close()

    tcp = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = tcp.sockets[0].getsockname()[1]
    server = Server(url=f"http://127.0.0.1:{port}")
    client = EngineClient(connect_timeout_s=2.0)
    try:
        yield server, client
    finally:
        await client.close()
        tcp.close()


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def json_answer(doc: object, status: int = 200) -> bytes:
    body = json.dumps(doc).encode()
    return (
        f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


async def test_request_bytes_and_a_chunked_stream_arriving_in_pieces() -> None:
    events = [b'data: {"n": %d}\n\n' % i for i in range(3)]

    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        writer.write(SSE_HEAD)
        for event in events:
            writer.write(chunked(event)[:-5])  # one chunk, no terminator yet
            await writer.drain()
            await asyncio.sleep(0.02)
        writer.write(b"0\r\n\r\n")
        return True

    async with scripted_server(answer) as (server, client):
        response = await client.post(
            server.url + "/v1/", "/v1/chat/completions", b'{"a":1}', HEADERS
        )
        assert response.status == 200
        assert response.headers["content-type"] == "text/event-stream"
        pieces = []
        while piece := await response.readany():
            pieces.append(piece)
        response.release()
    # Each event was handed over as it arrived, not after the whole answer.
    assert pieces == events
    (request,) = server.requests
    assert request.line == "POST /v1/v1/chat/completions HTTP/1.1"  # the base URL's path is kept
    assert request.headers["host"] == server.url.removeprefix("http://")
    assert request.headers["x-request-id"] == "req-1"
    assert request.headers["content-type"] == "application/json"
    assert request.body == b'{"a":1}'


async def test_keep_alive_reuses_one_connection_and_close_ends_it() -> None:
    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        writer.write(json_answer({"n": n}))
        return True

    async with scripted_server(answer) as (server, client):
        for i in range(3):
            response = await client.post(server.url, "/v1/completions", b"{}", HEADERS)
            assert json.loads(await response.read()) == {"n": i}
            response.release()
        assert server.connections == 1
        await client.close()
        await asyncio.wait_for(server.closed_by_peer.wait(), 2.0)


async def test_an_unfinished_answer_is_not_reused_and_its_close_reaches_the_engine() -> None:
    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        writer.write(SSE_HEAD + chunked(b"data: 1\n\n")[:-5])
        await writer.drain()
        return True

    async with scripted_server(answer) as (server, client):
        response = await client.post(server.url, "/v1/completions", b"{}", HEADERS)
        assert await response.readany() == b"data: 1\n\n"
        response.release()  # not complete: the connection is dropped, not pooled
        await asyncio.wait_for(server.closed_by_peer.wait(), 2.0)
        response = await client.post(server.url, "/v1/completions", b"{}", HEADERS)
        response.close()
        assert server.connections == 2


async def test_a_reused_connection_closed_without_an_answer_is_retried_on_a_fresh_one() -> None:
    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        if n == 0:
            writer.write(json_answer({"ok": True}))
            return True
        return False  # the keep-alive race: the engine drops the connection, unanswered

    async with scripted_server(answer) as (server, client):
        for _ in range(2):
            response = await client.post(server.url, "/v1/completions", b"{}", HEADERS)
            assert json.loads(await response.read()) == {"ok": True}
            response.release()
        assert len(server.requests) == 3  # first, the dropped one, its resend
        assert server.connections == 2


async def test_refused_connection_is_a_connect_error() -> None:
    client = EngineClient(connect_timeout_s=2.0)
    with pytest.raises(EngineConnectError, match="cannot connect"):
        await client.post(dead_url(), "/v1/completions", b"{}", HEADERS)
    with pytest.raises(EngineConnectError, match="engine URL"):
        await client.post("ftp://127.0.0.1:1", "/v1/completions", b"{}", HEADERS)


async def test_engine_dying_mid_stream_raises_after_the_bytes_that_came() -> None:
    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        writer.write(SSE_HEAD + chunked(b"data: 1\n\n")[:-5])
        await writer.drain()
        return False  # closes without the terminating chunk

    async with scripted_server(answer) as (server, client):
        response = await client.post(server.url, "/v1/completions", b"{}", HEADERS)
        assert await response.readany() == b"data: 1\n\n"
        with pytest.raises(EngineDisconnected):
            await response.readany()
        response.release()


async def test_a_body_past_the_limit_is_refused_before_it_is_read_whole() -> None:
    sent = {"bytes": 0}

    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        if request.line.startswith("POST /declared"):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 50331648\r\n\r\n")
            await writer.drain()
            return False
        # Chunked, no length: 48 chunks of 1 MiB, unless the reader stops first.
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        part = b"x" * (1 << 20)
        try:
            for _ in range(48):
                writer.write(chunked(part)[:-5])
                await writer.drain()
                sent["bytes"] += len(part)
        except ConnectionError:
            pass
        return False

    async with scripted_server(answer) as (server, client):
        declared = await client.post(server.url, "/declared", b"{}", HEADERS)
        with pytest.raises(EngineBodyTooLarge):
            await declared.read(limit=1 << 20)  # from Content-Length: nothing read
        declared.close()
        streamed = await client.post(server.url, "/chunked", b"{}", HEADERS)
        with pytest.raises(EngineBodyTooLarge):
            await streamed.read(limit=1 << 20)
        streamed.close()
        await asyncio.sleep(0.2)
    # The reader gave up after ~1 MiB and dropped the connection: the engine could not
    # send its 48 MiB (a few MiB sit in socket buffers).
    assert sent["bytes"] < 16 << 20


async def test_engine_closing_before_an_answer_is_a_disconnect() -> None:
    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        return False

    async with scripted_server(answer) as (server, client):
        with pytest.raises(EngineDisconnected):
            await client.post(server.url, "/v1/completions", b"{}", HEADERS)
        assert len(server.requests) == 1


async def test_garbage_instead_of_http_is_a_protocol_error() -> None:
    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1.0)
        return False

    async with scripted_server(answer) as (server, client):
        with pytest.raises(EngineProtocolError, match="invalid HTTP"):
            await client.post(server.url, "/v1/completions", b"{}", HEADERS)


async def test_a_body_delimited_by_the_connection_end_is_complete() -> None:
    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        writer.write(b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n")
        writer.write(b'{"whole": "body"}')
        await writer.drain()
        return False

    async with scripted_server(answer) as (server, client):
        response = await client.post(server.url, "/v1/completions", b"{}", HEADERS)
        assert json.loads(await response.read()) == {"whole": "body"}
        response.release()
        assert not client._idle.get(next(iter(client._bases.values()))[0])  # not pooled


async def test_a_slow_reader_pauses_the_engine_instead_of_buffering_everything() -> None:
    size = 16 * _HIGH_WATER
    payload = bytes(range(256)) * (size // 256)
    wrote = asyncio.Event()

    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        writer.write(
            f"HTTP/1.1 200 OK\r\ncontent-length: {len(payload)}\r\n\r\n".encode() + payload
        )
        wrote.set()
        await writer.drain()
        return True

    async with scripted_server(answer) as (server, client):
        response = await client.post(server.url, "/v1/completions", b"{}", HEADERS)
        await wrote.wait()
        await asyncio.sleep(0.3)  # the client reads nothing meanwhile
        buffered = response._conn.buffered
        assert 0 < buffered <= _HIGH_WATER + 512 * 1024  # paused, not the whole 4 MiB
        assert await response.read() == payload
        response.release()


async def test_a_caller_timeout_drops_the_connection() -> None:
    saw_close = asyncio.Event()

    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        if await reader.read() == b"":  # never answers; waits for the client to go
            saw_close.set()
        return False

    async with scripted_server(answer) as (server, client):
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await client.post(server.url, "/v1/completions", b"{}", HEADERS)
        await asyncio.wait_for(saw_close.wait(), 2.0)
        assert len(server.requests) == 1


async def test_header_injection_is_refused() -> None:
    client = EngineClient(connect_timeout_s=2.0)
    with pytest.raises(ValueError, match="invalid header"):
        await client.post("http://127.0.0.1:1", "/v1", b"{}", {"x-request-id": "a\r\nx: y"})


async def test_https_engines_are_verified_against_the_trust_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if await read_request(reader) is not None:
            writer.write(json_answer({"tls": True}))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls)
    url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        # Not trusted: the connection is refused before anything is sent.
        with pytest.raises(EngineConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await EngineClient(connect_timeout_s=2.0).post(url, "/v1/x", b"{}", HEADERS)
        # Trusted through the standard variable: the request goes through TLS.
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        client = EngineClient(connect_timeout_s=2.0)
        response = await client.post(url, "/v1/x", b"{}", HEADERS)
        assert json.loads(await response.read()) == {"tls": True}
        response.release()
        await client.close()
    finally:
        server.close()


async def test_idle_connections_of_an_origin_no_longer_used_are_closed() -> None:
    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        writer.write(json_answer({"n": n}))
        return True

    async with scripted_server(answer) as (gone, _), scripted_server(answer) as (used, _):
        client = EngineClient(connect_timeout_s=2.0, keepalive_s=0.2)
        for server in (gone, used):
            response = await client.post(server.url, "/v1/completions", b"{}", HEADERS)
            await response.read()
            response.release()
        await asyncio.sleep(0.3)
        response = await client.post(used.url, "/v1/completions", b"{}", HEADERS)
        await response.read()
        response.release()  # returning a connection sweeps the pool
        await asyncio.wait_for(gone.closed_by_peer.wait(), 2.0)
        assert [o.port for o in client._idle] == [int(used.url.rsplit(":", 1)[1])]
        await client.close()


async def test_a_kept_alive_connection_whose_engine_goes_silent_fails_at_the_header_deadline() -> (
    None
):
    # The engine answers the first request, keeps the connection, then stops answering:
    # on the reused connection the client must give up at the response-header deadline
    # (not the request's own one) and not send it again to the same silent engine.
    answered: list[int] = []

    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        if not answered:
            answered.append(n)
            writer.write(json_answer({"n": n}))
            return True
        await asyncio.sleep(30)  # accepted, then silent
        return False

    async with scripted_server(answer) as (server, client):
        first = await client.post(server.url, "/v1/completions", b"{}", HEADERS)
        assert json.loads(await first.read()) == {"n": 0}
        first.release()
        started = time.monotonic()
        with pytest.raises(EngineUnresponsive, match="response-header timeout"):
            await client.post(
                server.url, "/v1/completions", b"{}", HEADERS, timeout_s=20, header_timeout_s=0.3
            )
        elapsed = time.monotonic() - started
        assert 0.29 <= elapsed < 1.0, elapsed
        assert (server.connections, len(server.requests)) == (1, 2)
        # The request's own deadline, when it is the shorter one, is a plain timeout.
        with pytest.raises(TimeoutError):
            await client.post(
                server.url, "/v1/completions", b"{}", HEADERS, timeout_s=0.2, header_timeout_s=5
            )


async def test_every_engine_connection_bounds_unacknowledged_sends() -> None:
    async def answer(request: Request, reader: Reader, writer: Writer, n: int) -> bool:
        writer.write(json_answer({"n": n}))
        return True

    async with scripted_server(answer) as (server, _):
        client = EngineClient(connect_timeout_s=2.0, unacked_timeout_s=1.5)
        response = await client.post(server.url, "/v1/completions", b"{}", HEADERS)
        await response.read()
        sock = (
            response._conn.transport.get_extra_info("socket") if response._conn.transport else None
        )
        assert sock is not None
        # TCP_USER_TIMEOUT in ms: the kernel drops the connection when a request sent on
        # it stays unacknowledged that long (a partitioned host), raising EngineUnresponsive.
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 1500
        response.release()
        assert client.drop_idle(server.url) == 1
        assert client.drop_idle(server.url) == 0
        await client.close()
