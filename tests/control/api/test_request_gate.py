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
from tests.hostile.raw_bodies import chunk, exchange, post_head

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


def test_an_unauthenticated_huge_body_is_refused_before_it_is_read(control_port: int) -> None:
    """200 MB announced, not one byte sent: the 401 comes anyway."""
    started = time.monotonic()
    status, text = exchange(
        control_port, post_head("/admin/v1/pools", token=None, length=200_000_000)
    )
    assert status == 401 and '"code":"missing_token"' in text
    assert time.monotonic() - started < 3
    status, text = exchange(
        control_port, post_head("/admin/v1/pools", token="sr-admin-wrong", length=200_000_000)
    )
    assert status == 401 and '"code":"invalid_token"' in text
    chunked, _ = exchange(
        control_port, post_head("/internal/v1/telemetry", token=None), chunk(b"{")
    )
    assert chunked == 401


def test_a_malformed_body_without_a_token_is_401_not_422(control_port: int) -> None:
    body = b'{"name": '
    for path in ("/admin/v1/pools", "/internal/v1/workers/w/heartbeat", "/admin/v1/tenants"):
        status, text = exchange(control_port, post_head(path, token=None, length=len(body)), body)
        assert status == 401, text
        assert '"code":"missing_token"' in text and 'field_errors":null' in text
    # With the token, the same body is the route's usual 422.
    status, _ = exchange(
        control_port, post_head("/admin/v1/pools", token=ADMIN_TOKEN, length=len(body)), body
    )
    assert status == 422


def test_a_declared_length_over_the_limit_is_413_before_reading(control_port: int) -> None:
    status, text = exchange(
        control_port, post_head("/admin/v1/pools", token=ADMIN_TOKEN, length=MIB + 1)
    )
    assert status == 413
    assert '"code":"body_too_large"' in text and f'"limit_bytes":{MIB}' in text


def test_a_chunked_body_is_cut_off_once_it_passes_the_limit(control_port: int) -> None:
    """1.25 MiB sent in 64 KiB chunks and the body never finished: 413 all the same."""
    chunks = b"".join(chunk(b" " * 65536) for _ in range(20))
    status, text = exchange(control_port, post_head("/admin/v1/pools", token=ADMIN_TOKEN), chunks)
    assert status == 413 and '"code":"body_too_large"' in text


def test_named_routes_take_up_to_the_large_limit(control_port: int) -> None:
    """A 5 MiB telemetry body is read (and refused by validation, as it is not a
    batch); past 10 MiB it is 413."""
    padding = b'{"x": "' + b"a" * (5 * MIB) + b'"}'
    status, _ = exchange(
        control_port,
        post_head("/internal/v1/telemetry", token=INTERNAL_TOKEN, length=len(padding)),
        padding,
        timeout_s=30,
    )
    assert status == 422
    status, _ = exchange(
        control_port, post_head("/internal/v1/telemetry", token=INTERNAL_TOKEN, length=10 * MIB + 1)
    )
    assert status == 413
    # The same 5 MiB on a route without the large limit.
    status, _ = exchange(
        control_port,
        post_head("/admin/v1/tenants", token=ADMIN_TOKEN, length=len(padding)),
        padding,
    )
    assert status == 413


def test_a_body_within_the_limit_reaches_the_route(control_port: int) -> None:
    body = b'{"name": "gate-tenant"}'
    status, text = exchange(
        control_port, post_head("/admin/v1/tenants", token=ADMIN_TOKEN, length=len(body)), body
    )
    assert status == 201, text
    chunked = chunk(b'{"name": ') + chunk(b'"gate-tenant-2"}') + b"0\r\n\r\n"
    status, text = exchange(
        control_port, post_head("/admin/v1/tenants", token=ADMIN_TOKEN), chunked
    )
    assert status == 201, text
