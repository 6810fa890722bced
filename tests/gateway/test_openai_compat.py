"""What clients and proxies written elsewhere expect of an OpenAI surface (issue #24):
400 with OpenAI's error body for invalid requests (the typed code kept), GET
/v1/models/{id} for the `openai` client's models.retrieve, SSE headers proxies need,
the incompatible parameter named in the decision header, and the decision header and
the error body naming the same pool when no engine is up."""

from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from engine.fake import FakeUpstream
from specwire import RolloutState
from tests.gateway.policy import LIMITED_KEY, TENANT_KEY, make_snapshot
from tests.gateway.server import run_gateway, serve_app

AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with serve_app(FakeUpstream(4, 0.001, model="tiny")) as engine:
        snapshot = make_snapshot(spec_urls=[engine], baseline_urls=[engine])
        with run_gateway(tmp_path_factory.mktemp("gw"), snapshot) as gw:
            yield gw


def _client(gw: Any, key: str = TENANT_KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key=key, max_retries=0)


def test_the_openai_client_retrieves_a_model(gateway: Any) -> None:
    model = _client(gateway).models.retrieve("tiny")
    assert (model.id, model.object, model.owned_by) == ("tiny", "model", "specroute")
    listed = {m.id for m in _client(gateway).models.list()}
    assert "tiny" in listed
    with pytest.raises(openai.NotFoundError) as missing:
        _client(gateway).models.retrieve("no-such-model")
    assert missing.value.code == "model_not_found"
    # A model the key may not use is the same 404 as one that does not exist.
    with pytest.raises(openai.NotFoundError):
        _client(gateway, LIMITED_KEY).models.retrieve("tiny")
    with pytest.raises(openai.AuthenticationError):
        _client(gateway, "sk-wrong").models.retrieve("tiny")


def test_an_invalid_request_is_400_in_openais_shape(gateway: Any) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        _client(gateway).chat.completions.create(
            model="tiny",
            messages=MESSAGES,  # type: ignore[arg-type]
            temperature=7,
        )
    assert refused.value.status_code == 400
    assert refused.value.code == "invalid_value"
    assert refused.value.param == "temperature"
    assert refused.value.type == "invalid_request_error"


def test_streams_carry_the_headers_proxies_need(gateway: Any) -> None:
    body = {"model": "tiny", "messages": MESSAGES, "max_tokens": 4, "stream": True}
    with httpx.stream(
        "POST", f"{gateway.base_url}/v1/chat/completions", json=body, headers=AUTH
    ) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        assert resp.headers["cache-control"] == "no-cache"
        assert resp.headers["x-accel-buffering"] == "no"
        assert "[DONE]" in resp.read().decode()


def test_the_decision_header_names_the_incompatible_parameter(gateway: Any) -> None:
    body = {"model": "tiny", "messages": MESSAGES, "max_tokens": 4, "min_p": 0.1}
    resp = httpx.post(f"{gateway.base_url}/v1/chat/completions", json=body, headers=AUTH)
    assert resp.status_code == 200, resp.text
    assert resp.headers["x-specroute-decision"] == (
        "arm=baseline; reason=incompatible_parameter; param=min_p"
    )


@pytest.mark.parametrize(
    ("state", "percentage", "last_pool", "first_pool", "arm"),
    [
        (RolloutState.FULL, 100.0, "tiny-base", "tiny-spec", "baseline"),
        (RolloutState.CANARY, 0.0, "tiny-spec", "tiny-base", "spec"),
    ],
)
def test_with_no_engine_up_the_header_and_body_name_the_same_pool(
    tmp_path: Path,
    state: RolloutState,
    percentage: float,
    last_pool: str,
    first_pool: str,
    arm: str,
) -> None:
    snapshot = make_snapshot(spec_urls=[], baseline_urls=[], state=state, percentage=percentage)
    with run_gateway(tmp_path, snapshot) as gw:
        body = {"model": "tiny", "messages": MESSAGES, "max_tokens": 4}
        resp = httpx.post(f"{gw.base_url}/v1/chat/completions", json=body, headers=AUTH)
    assert resp.status_code == 503, resp.text
    header = resp.headers["x-specroute-decision"]
    assert header.startswith(f"arm={arm};") and header.endswith("reason=pool_unavailable")
    error = resp.json()["error"]
    assert error["code"] == "no_healthy_worker"
    assert f"pool '{last_pool}'" in error["message"]
    assert error["details"] == {"tried": [first_pool, last_pool]}
