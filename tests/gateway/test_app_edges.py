"""Front-door behaviour that needs no engine: readiness, auth, input errors, dead pools.

A real gateway (uvicorn on loopback) serves a real PolicySnapshot file; engines
are loopback ports nothing listens on, which is a real connection failure.
"""

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.routing.breaker import BreakerState
from specwire import Arm, RolloutState
from tests.gateway.policy import LIMITED_KEY, OVERRIDE_KEY, TENANT_KEY, make_snapshot
from tests.gateway.server import GatewayServer, dead_url, run_gateway

NOT_ROUTED = "arm=none; reason=rejected"
# A valid chat body up to its last field, so each case below adds one bad field.
M = b'{"model": "tiny", "messages": [{"role": "user", "content": "x"}], '
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}


def _auth(key: str = TENANT_KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def dead_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayServer]:
    snapshot = make_snapshot(spec_urls=[dead_url()], baseline_urls=[dead_url()])
    with run_gateway(
        tmp_path_factory.mktemp("gw"), snapshot, max_body_bytes=4096, breaker_failure_threshold=2
    ) as gw:
        yield gw


def _error(resp: httpx.Response) -> dict[str, Any]:
    body = resp.json()
    assert set(body) == {"error"}
    assert {"message", "type", "code"} <= set(body["error"])
    return dict(body["error"])


def test_not_ready_until_the_first_snapshot(tmp_path: Path) -> None:
    with run_gateway(tmp_path, None) as gw:
        assert httpx.get(gw.base_url + "/healthz").status_code == 200
        assert httpx.get(gw.base_url + "/readyz").status_code == 503
        resp = httpx.post(gw.base_url + "/v1/chat/completions", json=CHAT, headers=_auth())
        assert resp.status_code == 503 and _error(resp)["code"] == "not_ready"
        gw.set_snapshot(make_snapshot(spec_urls=[], baseline_urls=[], version=4))
        ready = httpx.get(gw.base_url + "/readyz")
        assert ready.status_code == 200 and ready.json()["snapshot_version"] == 4


@pytest.mark.parametrize(
    ("headers", "code"),
    [({}, "invalid_api_key"), ({"Authorization": "Bearer sk-wrong"}, "invalid_api_key")],
)
def test_missing_or_wrong_key_is_401(
    dead_gateway: GatewayServer, headers: dict[str, str], code: str
) -> None:
    resp = httpx.post(dead_gateway.base_url + "/v1/chat/completions", json=CHAT, headers=headers)
    assert resp.status_code == 401
    assert _error(resp) | {"message": ""} == {
        "message": "",
        "type": "authentication_error",
        "code": code,
        "param": None,
    }
    assert resp.headers["x-request-id"]
    assert resp.headers["x-specroute-decision"] == NOT_ROUTED


def test_model_not_allowed_is_403_and_models_lists_only_allowed(
    dead_gateway: GatewayServer,
) -> None:
    resp = httpx.post(
        dead_gateway.base_url + "/v1/chat/completions", json=CHAT, headers=_auth(LIMITED_KEY)
    )
    assert resp.status_code == 403 and _error(resp)["code"] == "model_not_allowed"
    listed = httpx.get(dead_gateway.base_url + "/v1/models", headers=_auth(LIMITED_KEY)).json()
    assert listed["data"] == []
    listed = httpx.get(dead_gateway.base_url + "/v1/models", headers=_auth()).json()
    assert [m["id"] for m in listed["data"]] == ["tiny"]


def test_override_header_without_permission_is_403(dead_gateway: GatewayServer) -> None:
    resp = httpx.post(
        dead_gateway.base_url + "/v1/chat/completions",
        json=CHAT,
        headers=_auth() | {"x-specroute-speculation": "off"},
    )
    assert resp.status_code == 403 and _error(resp)["code"] == "override_not_allowed"
    assert resp.headers["x-specroute-decision"] == NOT_ROUTED
    resp = httpx.post(
        dead_gateway.base_url + "/v1/chat/completions",
        json=CHAT,
        headers=_auth(OVERRIDE_KEY) | {"x-specroute-speculation": "maybe"},
    )
    assert resp.status_code == 400


@pytest.mark.parametrize(
    ("content", "status", "param"),
    [
        (b"{not json", 400, None),
        (b"[1, 2]", 400, None),
        (
            M + b'"temperature": NaN}',
            400,
            None,
        ),
        (b'{"model": "tiny"}', 400, "messages"),
        (b'{"model": "tiny", "messages": [], "max_tokens": 1}', 400, "messages"),
        (
            M + b'"temperature": "hot"}',
            400,
            "temperature",
        ),
        (
            M + b'"temperature": 3}',
            400,
            "temperature",
        ),
        (
            M + b'"max_tokens": 0}',
            400,
            "max_tokens",
        ),
        (
            M + b'"stream": "yes"}',
            400,
            "stream",
        ),
        (b'{"model": 5, "messages": [{"role": "user", "content": "x"}]}', 400, "model"),
        (b"\xff\xfe", 400, None),
    ],
)
def test_bad_bodies_are_4xx_in_openai_format(
    dead_gateway: GatewayServer, content: bytes, status: int, param: str | None
) -> None:
    resp = httpx.post(
        dead_gateway.base_url + "/v1/chat/completions",
        content=content,
        headers=_auth() | {"content-type": "application/json"},
    )
    assert resp.status_code == status, resp.text
    assert resp.headers["x-specroute-decision"] == NOT_ROUTED
    err = _error(resp)
    assert err["type"] == "invalid_request_error"
    if param is not None:
        assert err["param"] is not None and err["param"].startswith(param)


def test_oversized_body_is_413(dead_gateway: GatewayServer) -> None:
    big = {**CHAT, "messages": [{"role": "user", "content": "x" * 10_000}]}
    resp = httpx.post(dead_gateway.base_url + "/v1/chat/completions", json=big, headers=_auth())
    assert resp.status_code == 413 and _error(resp)["code"] == "payload_too_large"


def test_unknown_model_is_404(dead_gateway: GatewayServer) -> None:
    resp = httpx.post(
        dead_gateway.base_url + "/v1/chat/completions",
        json={**CHAT, "model": "gpt-x"},
        headers=_auth(),
    )
    assert resp.status_code == 404 and _error(resp)["code"] == "model_not_found"
    assert resp.headers["x-specroute-decision"] == NOT_ROUTED


def test_both_pools_down_is_503_with_decision_header_and_opens_breakers(
    dead_gateway: GatewayServer,
) -> None:
    dead_gateway.state.aggregator.drain_all()
    for _ in range(2):
        resp = httpx.post(
            dead_gateway.base_url + "/v1/chat/completions",
            json=CHAT,
            headers=_auth() | {"x-request-id": "req-dead-1"},
        )
        assert resp.status_code == 503, resp.text
        assert _error(resp)["code"] == "engine_unreachable"
        assert resp.headers["x-request-id"] == "req-dead-1"
        # The spec pool was tried first, then the baseline pool as the fallback.
        assert resp.headers["x-specroute-decision"] == "arm=baseline; reason=pool_unavailable"
    # Accounted under the arm last tried, with the reason the client was given.
    windows = [w for b in dead_gateway.state.aggregator.drain_all() for w in b.windows]
    assert [(w.arm, w.requests, w.errors) for w in windows] == [(Arm.BASELINE, 2, 2)]
    snapshot = dead_gateway.state.store.snapshot
    assert snapshot is not None
    for pool in snapshot.pools:
        assert dead_gateway.state.balancer.breaker(pool.workers[0]).state is BreakerState.OPEN
    # With every breaker open nothing is dialled: the answer says no healthy worker.
    resp = httpx.post(dead_gateway.base_url + "/v1/chat/completions", json=CHAT, headers=_auth())
    assert resp.status_code == 503 and _error(resp)["code"] == "no_healthy_worker"


def test_metrics_exposition_counts_decisions(dead_gateway: GatewayServer) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    httpx.post(dead_gateway.base_url + "/v1/chat/completions", json=CHAT, headers=_auth())
    resp = httpx.get(dead_gateway.base_url + "/metrics")
    assert resp.status_code == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(resp.text)
        for s in fam.samples
    }
    decisions = [v for (name, labels), v in samples.items() if "decision" in name and v > 0]
    assert decisions, sorted(k[0] for k in samples)


def test_stale_snapshot_header_says_so(tmp_path: Path) -> None:
    from tests.gateway.policy import stale

    snapshot = stale(
        make_snapshot(spec_urls=[dead_url()], baseline_urls=[dead_url()], state=RolloutState.FULL)
    )
    with run_gateway(tmp_path, snapshot) as gw:
        resp = httpx.post(gw.base_url + "/v1/chat/completions", json=CHAT, headers=_auth())
        assert resp.status_code == 503
        assert resp.headers["x-specroute-decision"] == "arm=baseline; reason=snapshot_stale"
        ready = httpx.get(gw.base_url + "/readyz")
        assert ready.status_code == 200  # keeps serving, on the baseline path
        assert ready.json()["fresh"] is False
        assert ready.json()["snapshot_age_s"] > ready.json()["snapshot_ttl_s"]


def test_a_stale_snapshot_is_not_ready_when_readiness_requires_a_fresh_one(
    tmp_path: Path,
) -> None:
    from tests.gateway.policy import stale

    fresh = make_snapshot(spec_urls=[], baseline_urls=[], version=5)
    with run_gateway(tmp_path, stale(fresh), ready_requires_fresh_snapshot=True) as gw:
        ready = httpx.get(gw.base_url + "/readyz")
        assert ready.status_code == 503
        assert ready.json()["ready"] is False and ready.json()["fresh"] is False
        assert "past its 3600 s TTL" in ready.json()["reason"]
        gw.set_snapshot(fresh.model_copy(update={"version": 6}))
        again = httpx.get(gw.base_url + "/readyz")
        assert again.status_code == 200 and again.json()["fresh"] is True


def test_workers_leaving_the_snapshot_drop_their_metric_series(tmp_path: Path) -> None:
    snapshot = make_snapshot(spec_urls=[dead_url()], baseline_urls=[dead_url()])
    with run_gateway(tmp_path, snapshot) as gw:
        httpx.post(gw.base_url + "/v1/chat/completions", json=CHAT, headers=_auth())
        before = httpx.get(gw.base_url + "/metrics").text
        assert (
            'specroute_gateway_outstanding_requests{pool="tiny-spec",worker="p1-w0"} 0.0' in before
        )
        gw.set_snapshot(make_snapshot(spec_urls=[], baseline_urls=[dead_url()], version=2))
        deadline = time.monotonic() + 3.0
        while 'worker="p1-w0"' in httpx.get(gw.base_url + "/metrics").text:
            assert time.monotonic() < deadline, "the departed worker's series stayed"
            time.sleep(0.05)


def test_openapi_documents_the_bodies_and_errors(dead_gateway: GatewayServer) -> None:
    doc = httpx.get(dead_gateway.base_url + "/openapi.json").json()
    chat = doc["paths"]["/v1/chat/completions"]["post"]
    schema = chat["requestBody"]["content"]["application/json"]["schema"]
    assert set(schema["required"]) == {"model", "messages"}
    assert schema["properties"]["temperature"]["anyOf"][0]["maximum"] == 2.0
    assert {"400", "401", "403", "408", "413", "429", "502", "503", "504"} <= set(chat["responses"])
    assert "$ref" not in str(doc["paths"])  # every schema is self-contained


def test_worker_registered_with_v1_suffix_is_reached_at_its_root() -> None:
    from gateway.proxy.upstream import engine_base

    assert engine_base("http://h:8000/v1/") == "http://h:8000"
    assert engine_base("http://h:8000") == "http://h:8000"


def test_engine_5xx_is_502_and_opens_the_breaker(tmp_path: Path) -> None:
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    from tests.gateway.server import serve_app

    # Fault injection: a real HTTP peer that fails like a broken engine (a vLLM 500
    # cannot be provoked on purpose).
    broken = FastAPI()
    calls = {"n": 0}

    @broken.post("/v1/chat/completions")
    def fail() -> JSONResponse:
        calls["n"] += 1
        return JSONResponse({"error": {"message": "boom", "type": "internal", "code": 500}}, 500)

    with serve_app(broken) as url:
        snapshot = make_snapshot(spec_urls=[url], baseline_urls=[url])
        with run_gateway(tmp_path, snapshot, breaker_failure_threshold=2) as gw:
            for _ in range(2):
                resp = httpx.post(gw.base_url + "/v1/chat/completions", json=CHAT, headers=_auth())
                assert resp.status_code == 502, resp.text
                assert _error(resp) | {"message": ""} == {
                    "message": "",
                    "type": "upstream_error",
                    "code": "engine_error",
                    "param": None,
                    "details": {
                        "engine_status": 500,
                        "tried": ["tiny-spec", "tiny-base"],
                    },
                }
            # Both pools share the one broken worker URL but are separate workers:
            # each request tried spec then baseline, so both breakers are open now.
            assert calls["n"] == 4
            resp = httpx.post(gw.base_url + "/v1/chat/completions", json=CHAT, headers=_auth())
            assert resp.status_code == 503 and _error(resp)["code"] == "no_healthy_worker"
            assert calls["n"] == 4  # nothing was sent to the open breakers


def test_wrong_method_on_a_completion_path_is_a_typed_405(dead_gateway: GatewayServer) -> None:
    # The completion fast lane takes POST only; everything else reaches FastAPI's router.
    resp = httpx.get(dead_gateway.base_url + "/v1/chat/completions", headers=_auth())
    assert resp.status_code == 405
    assert _error(resp)["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/chat/completions/"), ("POST", "/v1/completions/"), ("GET", "/healthz/")],
)
def test_a_trailing_slash_is_a_typed_404_not_a_redirect(
    dead_gateway: GatewayServer, method: str, path: str
) -> None:
    # A 307 would send the client to the scheme and host this process sees: http://
    # behind a TLS-terminating load balancer.
    resp = httpx.request(method, dead_gateway.base_url + path, json=CHAT, headers=_auth())
    assert resp.status_code == 404 and "location" not in resp.headers
    assert _error(resp) == {
        "message": f"Not Found: the API's paths have no trailing slash; use {path[:-1]}",
        "type": "invalid_request_error",
        "code": "not_found",
        "param": None,
    }


def test_a_bug_in_the_request_path_is_a_typed_500_with_its_request_id(
    dead_gateway: GatewayServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # NOTE: a defect cannot be produced for real; this injects one where the
    # request path decides, to check the fast lane renders it like FastAPI would.
    import gateway.pipeline as pipeline

    def broken_decide(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("injected defect")

    monkeypatch.setattr(pipeline, "decide", broken_decide)
    resp = httpx.post(
        dead_gateway.base_url + "/v1/chat/completions",
        json=CHAT,
        headers={**_auth(), "x-request-id": "bug-1"},
    )
    assert resp.status_code == 500
    assert _error(resp) == {
        "message": "internal error",
        "type": "internal_error",
        "code": "internal_error",
        "param": None,
    }
    assert resp.headers["x-request-id"] == "bug-1"
    assert "injected defect" not in resp.text
    assert any(r.getMessage() == "internal error" and r.exc_info for r in caplog.records)
