"""specroute_gateway_refusals_total on a real gateway: every request answered with a
typed error before its routing decision counts once, by (status, code); a served
request, and one refused after its decision (an engine's 400, counted in
requests_total), do not."""

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.fake import FakeUpstream
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.scrape import refusals, scrape
from tests.gateway.server import GatewayServer, run_gateway, serve_app

AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
LIMIT = 4096  # max_body_bytes of the gateway under test


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayServer]:
    with serve_app(FakeUpstream(4, 0.001, model="tiny")) as url:
        snapshot = make_snapshot(spec_urls=[url], baseline_urls=[url])
        with run_gateway(tmp_path, snapshot, max_body_bytes=LIMIT) as gw:
            yield gw


def post(gw: GatewayServer, content: bytes, **headers: str) -> httpx.Response:
    return httpx.post(
        gw.base_url + "/v1/chat/completions",
        content=content,
        headers=AUTH | {"content-type": "application/json"} | headers,
    )


def test_each_refusal_before_routing_counts_once_by_status_and_code(
    gateway: GatewayServer,
) -> None:
    body = json.dumps(CHAT).encode()
    answers = [
        post(gateway, b"{not json"),
        post(gateway, b'{"model": '),
        post(gateway, body[:-1] + b" " * LIMIT + b"}"),
        post(gateway, body, **{"content-encoding": "br"}),
        post(gateway, json.dumps(CHAT | {"model": "nope"}).encode()),
        post(gateway, json.dumps(CHAT | {"max_tokens": -1}).encode()),
        httpx.get(gateway.base_url + "/v1/chat/completions", headers=AUTH),
        httpx.get(gateway.base_url + "/v1/nowhere", headers=AUTH),
        httpx.post(gateway.base_url + "/v1/chat/completions", json=CHAT),
    ]
    got = [(r.status_code, r.json()["error"]["code"]) for r in answers]
    assert got == [
        (400, "invalid_json"),
        (400, "invalid_json"),
        (413, "payload_too_large"),
        (415, "unsupported_content_encoding"),
        (404, "model_not_found"),
        (400, "invalid_value"),
        (405, "method_not_allowed"),
        (404, "not_found"),
        (401, "invalid_api_key"),
    ]
    assert refusals(gateway) == {
        ("400", "invalid_json"): 2.0,
        ("413", "payload_too_large"): 1.0,
        ("415", "unsupported_content_encoding"): 1.0,
        ("404", "model_not_found"): 1.0,
        ("400", "invalid_value"): 1.0,
        ("405", "method_not_allowed"): 1.0,
        ("404", "not_found"): 1.0,
        ("401", "invalid_api_key"): 1.0,
    }
    # The missing key also counts by its reason; no refusal reached requests_total.
    assert scrape(gateway, "specroute_gateway_auth_failures", "reason")[("missing_token",)] == 1.0
    assert scrape(gateway, "specroute_gateway_requests", "status") == {}


def test_a_client_that_leaves_before_its_body_counts_as_499(gateway: GatewayServer) -> None:
    host, port = gateway.base_url.removeprefix("http://").split(":")
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\n"
        f"Host: {host}\r\nAuthorization: Bearer {TENANT_KEY}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(head.encode() + b'{"model": "tiny"')
        time.sleep(0.2)  # the gateway is reading the body when the client goes
    deadline = time.monotonic() + 5.0
    while not (counted := refusals(gateway)):
        assert time.monotonic() < deadline, "the departed client was never counted"
        time.sleep(0.05)
    assert counted == {("499", "client_disconnected"): 1.0}


class RefusingEngine:
    """An engine that refuses every completion with its own 400 and code."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = json.dumps({"error": {"message": "no", "code": "engine_says_no"}}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


def test_served_requests_and_refusals_after_routing_are_not_counted(
    gateway: GatewayServer, tmp_path: Path
) -> None:
    ok = post(gateway, json.dumps(CHAT).encode())
    streamed = post(gateway, json.dumps(CHAT | {"stream": True}).encode())
    assert (ok.status_code, streamed.status_code) == (200, 200)
    assert "[DONE]" in streamed.text
    assert refusals(gateway) == {}
    with serve_app(RefusingEngine()) as url:
        snapshot = make_snapshot(spec_urls=[url], baseline_urls=[url])
        with run_gateway(tmp_path / "refusing", snapshot) as gw:
            refused = post(gw, json.dumps(CHAT).encode())
            assert refused.status_code == 400
            assert refused.json()["error"]["code"] == "engine_says_no"
            # Counted once, as a routed request's client error, never as a refusal.
            assert refusals(gw) == {}
            routed = scrape(gw, "specroute_gateway_requests", "outcome", "status")
            assert routed == {("client_error", "400"): 1.0}
