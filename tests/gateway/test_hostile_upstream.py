"""An engine that misbehaves is an upstream error (502 or a typed error event), never a
500 and never an empty success; a worker URL the gateway cannot encode is that
worker's failure, counted by its breaker."""

from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import OpenAI

from gateway.routing.breaker import BreakerState
from specwire import WorkerHeartbeat
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import run_gateway, serve_app
from tests.hostile.upstream import GARBAGE_STREAM, NAN_JSON, REDIRECT, HostileEngine

AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}


def _chat(mode: str, *, stream: bool = False) -> dict[str, Any]:
    return {
        "model": "tiny",
        "messages": [{"role": "user", "content": mode}],
        "max_tokens": 4,
        "stream": stream,
    }


@pytest.fixture(scope="module")
def hostile_gateway(tmp_path_factory: pytest.TempPathFactory) -> Any:
    engine = HostileEngine()
    with serve_app(engine) as url:
        snapshot = make_snapshot(spec_urls=[url], baseline_urls=[url])
        with run_gateway(
            tmp_path_factory.mktemp("gw"), snapshot, breaker_failure_threshold=1000
        ) as gw:
            yield gw, engine


def test_nan_in_an_engine_answer_is_502(hostile_gateway: Any) -> None:
    gw, _ = hostile_gateway
    resp = httpx.post(f"{gw.base_url}/v1/chat/completions", json=_chat(NAN_JSON), headers=AUTH)
    assert resp.status_code == 502, resp.text
    assert resp.json()["error"]["type"] == "upstream_error"


def test_an_engine_redirect_with_a_json_body_is_502_not_an_empty_200(hostile_gateway: Any) -> None:
    gw, engine = hostile_gateway
    before = engine.calls.get(REDIRECT, 0)
    resp = httpx.post(f"{gw.base_url}/v1/chat/completions", json=_chat(REDIRECT), headers=AUTH)
    assert resp.status_code == 502, resp.text
    assert resp.json()["error"]["code"] == "unexpected_engine_status"
    # Counted as the worker's failure: the request moved on to the other pool's worker.
    assert engine.calls[REDIRECT] == before + 2
    streamed = httpx.post(
        f"{gw.base_url}/v1/chat/completions", json=_chat(REDIRECT, stream=True), headers=AUTH
    )
    assert streamed.status_code == 502


def test_a_stream_of_unparseable_events_ends_in_a_typed_error_event(
    hostile_gateway: Any,
) -> None:
    gw, _ = hostile_gateway
    client = OpenAI(base_url=f"{gw.base_url}/v1", api_key=TENANT_KEY, max_retries=0)
    stream = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": GARBAGE_STREAM}], stream=True
    )
    with pytest.raises(Exception) as raised:
        list(stream)
    assert "not a JSON object" in str(raised.value)
    raw = httpx.post(
        f"{gw.base_url}/v1/chat/completions", json=_chat(GARBAGE_STREAM, stream=True), headers=AUTH
    )
    assert raw.status_code == 200  # the status line left before the first event
    assert '"code": "invalid_engine_event"' in raw.text
    assert "[DONE]" not in raw.text  # no success marker after an upstream error
    # A well-formed stream through the same gateway still works.
    ok = client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "ok"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in ok if c.choices) == "hi"


def test_a_worker_url_the_gateway_cannot_encode_fails_that_worker_only(tmp_path: Path) -> None:
    engine = HostileEngine()
    with serve_app(engine) as url:
        bad = "http://engine-ü.example:8000"
        snapshot = make_snapshot(spec_urls=[bad], baseline_urls=[url])
        with run_gateway(tmp_path, snapshot, breaker_failure_threshold=2) as gw:
            for _ in range(3):
                resp = httpx.post(
                    f"{gw.base_url}/v1/chat/completions", json=_chat("ok"), headers=AUTH
                )
                assert resp.status_code == 200, resp.text  # fell back to the baseline worker
            snapshot_now = gw.state.store.snapshot
            assert snapshot_now is not None
            spec_pool = next(p for p in snapshot_now.pools if p.workers[0].endpoint_url == bad)
            assert gw.state.balancer.breaker(spec_pool.workers[0]).state is BreakerState.OPEN
    # Where heartbeats arrive, such a URL is refused outright.
    with pytest.raises(ValueError, match="ASCII"):
        WorkerHeartbeat(pool_id=1, endpoint_url=bad, healthy=True, sent_at="2026-01-01T00:00:00Z")
