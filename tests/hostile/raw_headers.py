"""Requests with header values no HTTP client library will send (non-ASCII bytes,
UTF-8, Latin-1, control characters), written on a raw socket.

httpx refuses to encode such values, so the fuzz in tests/hostile could not send 226
of its cases; a real peer can send any bytes. Each case is one request on its own
connection; the answer is read up to its status line (and body, for the tests).
`control_answers` and `gateway_answers` send the cases to a real control plane and a
real gateway, for the tests and for `python -m tests.hostile`.
"""

import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from control.app import create_app
from control.migrate import upgrade
from control.settings import ControlSettings
from engine.fake import FakeUpstream
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import run_gateway, serve_app

# Values a header may hold on the wire but that are not ASCII text, or not text.
HOSTILE_VALUES: tuple[bytes, ...] = (
    "é".encode(),  # UTF-8
    "é".encode("latin-1"),  # a lone Latin-1 byte
    "Bearer sk-\u00fc\u00f1\u00ee".encode(),
    "Bearer 密钥".encode(),
    b"\xff\xfe\xfd",  # not UTF-8 at all
    b"\xed\xa0\x80",  # a UTF-8-encoded surrogate
    "\u202e".encode(),  # right-to-left override
    b"a\x00b",  # NUL
    b"a\x7fb",  # DEL
    b"a\x01b",  # a control character
    b"\xc3",  # a truncated UTF-8 sequence
    "🙂".encode() * 50,
)


@dataclass(frozen=True)
class RawAnswer:
    status: int  # 0: the server closed the connection without an answer
    body: bytes


def send_raw(
    port: int,
    method: str,
    path: str,
    headers: list[tuple[bytes, bytes]],
    body: bytes = b"",
    *,
    host: str = "127.0.0.1",
    timeout_s: float = 10.0,
) -> RawAnswer:
    head = [f"{method} {path} HTTP/1.1".encode(), b"host: " + host.encode()]
    head += [name + b": " + value for name, value in headers]
    head += [b"content-length: " + str(len(body)).encode(), b"connection: close"]
    request = b"\r\n".join(head) + b"\r\n\r\n" + body
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(request)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            chunks.append(chunk)
    answer = b"".join(chunks)
    if not answer.startswith(b"HTTP/1."):
        return RawAnswer(0, answer)
    status = int(answer.split(b" ", 2)[1])
    return RawAnswer(status, answer.partition(b"\r\n\r\n")[2])


@dataclass(frozen=True)
class RawCase:
    method: str
    path: str
    headers: list[tuple[bytes, bytes]]
    body: bytes
    what: str


def _cases(routes: list[tuple[str, str, bytes, bytes]], names: list[bytes]) -> list[RawCase]:
    """Every route with each named header replaced (or added) by each hostile value;
    `routes` hold (method, path, body, bearer token)."""
    cases = []
    for method, path, body, token in routes:
        for name in names:
            for value in HOSTILE_VALUES:
                base = [
                    (b"authorization", b"Bearer " + token),
                    (b"content-type", b"application/json"),
                ]
                headers = [h for h in base if h[0] != name] + [(name, value)]
                what = f"{method} {path} {name.decode()}: {value!r}"
                cases.append(RawCase(method, path, headers, body, what))
    return cases


CHAT_BODY = b'{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}'
GATEWAY_HEADERS = [
    b"authorization",
    b"x-request-id",
    b"x-specroute-speculation",
    b"x-specroute-task",
    b"x-specroute-session",
    b"content-type",
    b"user-agent",
    b"x-custom",
]
CONTROL_HEADERS = [
    b"authorization",
    b"x-request-id",
    b"if-match",
    b"if-none-match",
    b"content-type",
    b"accept",
    b"x-custom",
]


def gateway_cases(tenant_key: str) -> list[RawCase]:
    key = tenant_key.encode()
    routes = [
        ("POST", "/v1/chat/completions", CHAT_BODY, key),
        ("GET", "/v1/models", b"", key),
        ("GET", "/v1/models/tiny", b"", key),
    ]
    return _cases(routes, GATEWAY_HEADERS)


def control_cases(admin_token: str, internal_token: str, tenant_id: int) -> list[RawCase]:
    admin, internal = admin_token.encode(), internal_token.encode()
    routes = [
        ("GET", "/admin/v1/pools", b"", admin),
        ("POST", "/admin/v1/tenants", b'{"name": "raw-headers"}', admin),
        ("PATCH", f"/admin/v1/tenants/{tenant_id}", b'{"request_sample_rate": 0.5}', admin),
        ("GET", "/internal/v1/snapshot", b"", internal),
        ("GET", "/healthz", b"", admin),
    ]
    return _cases(routes, CONTROL_HEADERS)


def is_http_layer_400(answer: RawAnswer) -> bool:
    """uvicorn's own refusal of a request it cannot parse (a NUL or control byte in a
    header): a plain 400 before the application sees anything."""
    return answer.status == 400 and b"Invalid HTTP request" in answer.body


def run_cases(port: int, cases: list[RawCase]) -> list[tuple[RawCase, RawAnswer]]:
    return [(c, send_raw(port, c.method, c.path, c.headers, c.body)) for c in cases]


def _port(base_url: str) -> int:
    port = urlsplit(base_url).port
    assert port is not None, base_url
    return port


def control_answers(work: Path) -> list[tuple[RawCase, RawAnswer]]:
    """`control_cases` against a real control plane under uvicorn, its SQLite database
    in `work`, with a tenant made for the routes that need one."""
    url = f"sqlite:///{work / 'raw-headers.db'}"
    upgrade(url)
    settings = ControlSettings(
        data_dir=work,
        database_url=url,
        admin_token="raw-admin",
        internal_token="raw-int",
        # Bad Authorization values on purpose, from one address: no failure limit.
        auth_failure_burst=1_000_000,
    )
    with serve_app(create_app(settings)) as base:
        created = httpx.post(
            f"{base}/admin/v1/tenants",
            json={"name": "raw"},
            headers={"Authorization": "Bearer raw-admin"},
        )
        assert created.status_code == 201, created.text
        cases = control_cases("raw-admin", "raw-int", created.json()["id"])
        return run_cases(_port(base), cases)


def gateway_answers(work: Path) -> list[tuple[RawCase, RawAnswer]]:
    """`gateway_cases` against a real gateway (its files in `work`) over a fake engine."""
    with serve_app(FakeUpstream(2, 0.001, model="tiny")) as engine:
        snapshot = make_snapshot(spec_urls=[engine], baseline_urls=[engine])
        with run_gateway(work, snapshot) as gw:
            return run_cases(_port(gw.base_url), gateway_cases(TENANT_KEY))
