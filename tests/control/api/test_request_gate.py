"""Control authenticates before it reads a body and caps the body while reading it
(issue #21, item 3), on a real uvicorn server spoken to over raw sockets: the
answers below arrive while the client is still holding most of its body back."""

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from control.app import create_app
from control.migrate import upgrade
from control.settings import ControlSettings
from tests.fixtures.db import ADMIN_TOKEN, INTERNAL_TOKEN

MIB = 1 << 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def control_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    data: Path = tmp_path_factory.mktemp("gate")
    url = f"sqlite:///{data / 'control.db'}"
    upgrade(url)
    settings = ControlSettings(
        data_dir=data, database_url=url, admin_token=ADMIN_TOKEN, internal_token=INTERNAL_TOKEN
    )
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "control did not start"
        time.sleep(0.05)
    yield port
    server.should_exit = True
    thread.join(timeout=10)


def _exchange(port: int, head: str, body: bytes = b"", *, timeout: float = 5.0) -> tuple[int, str]:
    """Sends the request head and `body` (not necessarily all the head announces), then
    reads the answer: (status, raw response text). Times out if none comes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n" + body)
        received = b""
        while b"\r\n\r\n" not in received or not _complete(received):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
    text = received.decode("latin-1")
    return int(text.split(" ", 2)[1]), text


def _complete(received: bytes) -> bool:
    head, _, body = received.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return True


def _head(path: str, *, token: str | None, length: int | None = None) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: control", "Content-Type: application/json"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    return "\r\n".join(lines) + "\r\n"


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def test_an_unauthenticated_huge_body_is_refused_before_it_is_read(control_port: int) -> None:
    """200 MB announced, not one byte sent: the 401 comes anyway."""
    started = time.monotonic()
    status, text = _exchange(control_port, _head("/admin/v1/pools", token=None, length=200_000_000))
    assert status == 401 and '"code":"missing_token"' in text
    assert time.monotonic() - started < 3
    status, text = _exchange(
        control_port, _head("/admin/v1/pools", token="sr-admin-wrong", length=200_000_000)
    )
    assert status == 401 and '"code":"invalid_token"' in text
    chunked, _ = _exchange(control_port, _head("/internal/v1/telemetry", token=None), _chunk(b"{"))
    assert chunked == 401


def test_a_malformed_body_without_a_token_is_401_not_422(control_port: int) -> None:
    body = b'{"name": '
    for path in ("/admin/v1/pools", "/internal/v1/workers/w/heartbeat", "/admin/v1/tenants"):
        status, text = _exchange(control_port, _head(path, token=None, length=len(body)), body)
        assert status == 401, text
        assert '"code":"missing_token"' in text and 'field_errors":null' in text
    # With the token, the same body is the route's usual 422.
    status, _ = _exchange(
        control_port, _head("/admin/v1/pools", token=ADMIN_TOKEN, length=len(body)), body
    )
    assert status == 422


def test_a_declared_length_over_the_limit_is_413_before_reading(control_port: int) -> None:
    status, text = _exchange(
        control_port, _head("/admin/v1/pools", token=ADMIN_TOKEN, length=MIB + 1)
    )
    assert status == 413
    assert '"code":"body_too_large"' in text and f'"limit_bytes":{MIB}' in text


def test_a_chunked_body_is_cut_off_once_it_passes_the_limit(control_port: int) -> None:
    """1.25 MiB sent in 64 KiB chunks and the body never finished: 413 all the same."""
    chunks = b"".join(_chunk(b" " * 65536) for _ in range(20))
    status, text = _exchange(control_port, _head("/admin/v1/pools", token=ADMIN_TOKEN), chunks)
    assert status == 413 and '"code":"body_too_large"' in text


def test_named_routes_take_up_to_the_large_limit(control_port: int) -> None:
    """A 5 MiB telemetry body is read (and refused by validation, as it is not a
    batch); past 10 MiB it is 413."""
    padding = b'{"x": "' + b"a" * (5 * MIB) + b'"}'
    status, _ = _exchange(
        control_port,
        _head("/internal/v1/telemetry", token=INTERNAL_TOKEN, length=len(padding)),
        padding,
        timeout=30,
    )
    assert status == 422
    status, _ = _exchange(
        control_port, _head("/internal/v1/telemetry", token=INTERNAL_TOKEN, length=10 * MIB + 1)
    )
    assert status == 413
    # The same 5 MiB on a route without the large limit.
    status, _ = _exchange(
        control_port, _head("/admin/v1/tenants", token=ADMIN_TOKEN, length=len(padding)), padding
    )
    assert status == 413


def test_a_body_within_the_limit_reaches_the_route(control_port: int) -> None:
    body = b'{"name": "gate-tenant"}'
    status, text = _exchange(
        control_port, _head("/admin/v1/tenants", token=ADMIN_TOKEN, length=len(body)), body
    )
    assert status == 201, text
    chunked = _chunk(b'{"name": ') + _chunk(b'"gate-tenant-2"}') + b"0\r\n\r\n"
    status, text = _exchange(control_port, _head("/admin/v1/tenants", token=ADMIN_TOKEN), chunked)
    assert status == 201, text
