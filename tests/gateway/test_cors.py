"""CORS on a real gateway: off by default (no headers, a preflight is 405); with
`cors_origins` set, a listed origin's preflight is answered and every answer to it,
streamed completions and typed errors included, carries the headers a browser needs;
an unlisted origin gets none, and its preflight a typed 400 counted as a refusal.
Bad origins are refused at start."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from engine.fake import FakeUpstream
from gateway.settings import GatewaySettings
from specwire import PolicySnapshot
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.scrape import refusals
from tests.gateway.server import run_gateway, serve_app

APP = "https://app.example.com"
AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type, x-specroute-task",
}


@pytest.fixture(scope="module")
def snapshot() -> Iterator[PolicySnapshot]:
    with serve_app(FakeUpstream(5, 0.001, model="tiny")) as url:
        yield make_snapshot(spec_urls=[url], baseline_urls=[url])


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


def test_cors_is_off_by_default(tmp_path: Path, snapshot: PolicySnapshot) -> None:
    with run_gateway(tmp_path, snapshot) as gw, httpx.Client(base_url=gw.base_url) as client:
        preflight = client.options("/v1/chat/completions", headers=PREFLIGHT | {"Origin": APP})
        assert preflight.status_code == 405
        r = client.post("/v1/chat/completions", json=CHAT, headers=AUTH | {"Origin": APP})
        assert r.status_code == 200 and cors_headers(r) == {}


def test_a_listed_origin_gets_preflights_and_headers_on_every_answer(
    tmp_path: Path, snapshot: PolicySnapshot
) -> None:
    origins = f"{APP}, http://localhost:3000"
    with (
        run_gateway(tmp_path, snapshot, cors_origins=origins) as gw,
        httpx.Client(base_url=gw.base_url) as client,
    ):
        preflight = client.options("/v1/chat/completions", headers=PREFLIGHT | {"Origin": APP})
        assert preflight.status_code == 200
        allowed = cors_headers(preflight)
        assert allowed["access-control-allow-origin"] == APP
        assert "POST" in allowed["access-control-allow-methods"]
        assert "x-specroute-task" in allowed["access-control-allow-headers"].lower()
        assert "access-control-allow-credentials" not in allowed
        # A streamed completion: the headers are on the response start.
        with client.stream(
            "POST",
            "/v1/chat/completions",
            json=CHAT | {"stream": True},
            headers=AUTH | {"Origin": "http://localhost:3000"},
        ) as stream:
            body = stream.read().decode()
            assert stream.status_code == 200 and body.rstrip().endswith("data: [DONE]")
            headers = cors_headers(stream)
            assert headers["access-control-allow-origin"] == "http://localhost:3000"
            assert "x-request-id" in headers["access-control-expose-headers"]
        # A typed error is readable by the page too.
        denied = client.post(
            "/v1/chat/completions",
            json=CHAT,
            headers={"Authorization": "Bearer sk-wrong", "Origin": APP},
        )
        assert denied.status_code == 401
        assert denied.json()["error"]["code"] == "invalid_api_key"
        assert cors_headers(denied)["access-control-allow-origin"] == APP
        # GET routes as well.
        models = client.get("/v1/models", headers=AUTH | {"Origin": APP})
        assert models.status_code == 200
        assert cors_headers(models)["access-control-allow-origin"] == APP
        # An origin not on the list: its preflight fails and no answer names it.
        evil = "https://evil.example"
        refused = client.options("/v1/chat/completions", headers=PREFLIGHT | {"Origin": evil})
        assert refused.status_code == 400
        assert refused.json()["error"] == {
            "message": "CORS preflight refused: origin not allowed",
            "type": "invalid_request_error",
            "param": None,
            "code": "cors_disallowed",
        }
        assert "access-control-allow-origin" not in cors_headers(refused)
        # A listed origin asking for a method the gateway does not take is refused too.
        put = PREFLIGHT | {"Origin": APP, "Access-Control-Request-Method": "PUT"}
        wrong_method = client.options("/v1/chat/completions", headers=put)
        assert wrong_method.status_code == 400
        assert wrong_method.json()["error"]["message"].endswith("method not allowed")
        assert refusals(gw) == {("400", "cors_disallowed"): 2.0, ("401", "invalid_api_key"): 1.0}
        r = client.post("/v1/chat/completions", json=CHAT, headers=AUTH | {"Origin": evil})
        assert r.status_code == 200 and "access-control-allow-origin" not in cors_headers(r)


def test_cors_origins_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECROUTE_GATEWAY_CORS_ORIGINS", "https://a.example, http://b:8080")
    assert GatewaySettings().exposure.cors_origins == ["https://a.example", "http://b:8080"]
    monkeypatch.setenv("SPECROUTE_GATEWAY_CORS_ORIGINS", "*")
    assert GatewaySettings().exposure.cors_origins == ["*"]


@pytest.mark.parametrize(
    "origin",
    [
        "https://app.example.com/",
        "app.example.com",
        "ftp://a.example",
        "https://",
        "https://a.example:99999",
    ],
)
def test_an_origin_a_browser_never_sends_is_refused(origin: str) -> None:
    with pytest.raises(ValidationError, match="CORS origin"):
        GatewaySettings(cors_origins=origin)
