"""An engine's answers reach the client in the gateway's own terms (issue #21): its
error events become the gateway's typed event, a status no OpenAI engine sends is a
502 naming that status, its 400s carry a named code, and an answer past the size cap
is refused without being read whole. Against a real fake-engine HTTP server."""

import json
from typing import Any

import httpx
import pytest

from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import run_gateway, serve_app
from tests.hostile.upstream import (
    BAD_REQUEST,
    ERROR_EVENT,
    HUGE_BODY,
    HUGE_EVENT,
    TEAPOT,
    HostileEngine,
)

AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}


def _chat(mode: str, *, stream: bool = False) -> dict[str, Any]:
    return {
        "model": "tiny",
        "messages": [{"role": "user", "content": mode}],
        "max_tokens": 4,
        "stream": stream,
    }


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Any:
    engine = HostileEngine()
    with serve_app(engine) as url:
        snapshot = make_snapshot(spec_urls=[url], baseline_urls=[url])
        with run_gateway(
            tmp_path_factory.mktemp("gw"),
            snapshot,
            breaker_failure_threshold=1000,
            engine_max_body_bytes=1 << 20,
        ) as gw:
            yield gw


def _events(text: str) -> list[Any]:
    return [
        json.loads(line[6:])
        for line in text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def test_an_engine_error_event_becomes_the_gateways_typed_event(gateway: Any) -> None:
    resp = httpx.post(
        f"{gateway.base_url}/v1/chat/completions",
        json=_chat(ERROR_EVENT, stream=True),
        headers=AUTH,
    )
    assert resp.status_code == 200
    errors = [e["error"] for e in _events(resp.text) if "error" in e]
    assert errors == [
        {
            "message": "The engine reported an error",
            "type": "upstream_error",
            "code": "engine_error",
            "details": {"engine_code": "500"},
        }
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_an_unexpected_engine_status_is_502_naming_it(gateway: Any, stream: bool) -> None:
    resp = httpx.post(
        f"{gateway.base_url}/v1/chat/completions", json=_chat(TEAPOT, stream=stream), headers=AUTH
    )
    assert resp.status_code == 502, resp.text
    error = resp.json()["error"]
    assert error["code"] == "unexpected_engine_status"
    assert error["details"]["engine_status"] == 418
    # Counted against the worker: the request tried the other pool too.
    assert error["details"]["tried"] == ["tiny-spec", "tiny-base"]


def test_an_engine_400_carries_a_named_code(gateway: Any) -> None:
    resp = httpx.post(
        f"{gateway.base_url}/v1/chat/completions", json=_chat(BAD_REQUEST), headers=AUTH
    )
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error"
    assert error["details"] == {"engine_status": 400}
    assert "maximum context length" in error["message"]


def test_a_48_mib_engine_body_is_refused_unread(gateway: Any) -> None:
    resp = httpx.post(
        f"{gateway.base_url}/v1/chat/completions", json=_chat(HUGE_BODY), headers=AUTH
    )
    assert resp.status_code == 502, resp.text
    error = resp.json()["error"]
    assert error["code"] == "engine_body_too_large"
    assert error["details"] == {"limit_bytes": 1 << 20}
    streamed = httpx.post(
        f"{gateway.base_url}/v1/chat/completions", json=_chat(HUGE_EVENT, stream=True), headers=AUTH
    )
    assert streamed.status_code == 200
    errors = [e["error"]["code"] for e in _events(streamed.text) if "error" in e]
    assert errors == ["engine_event_too_large"]
    assert "[DONE]" not in streamed.text
