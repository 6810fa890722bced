"""The failure lab on the real engines (the session's tiny vLLM pools): what the
design promises for a speculating pool when a client leaves mid-stream, and for
structured output on a pair version that declares the capability."""

import json
import re
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from specwire import PairCapabilities
from tests.fixtures.vllm import RunningServer
from tests.gateway.policy import OVERRIDE_KEY, TENANT_KEY, make_snapshot
from tests.gateway.server import GatewayServer, run_gateway

pytestmark = pytest.mark.vllm

RUNNING = "vllm:num_requests_running"
KV_CACHE = "vllm:kv_cache_usage_perc"
GENERATED = "vllm:generation_tokens_total"


def _metric(server: RunningServer, name: str) -> float:
    text = httpx.get(server.base_url + "/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def _wait_idle(server: RunningServer, timeout_s: float = 30.0) -> float:
    started = time.monotonic()
    while _metric(server, RUNNING) > 0 or _metric(server, KV_CACHE) > 0:
        assert time.monotonic() - started < timeout_s, "engine never returned to idle"
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.fixture(scope="module")
def lab_gateway(
    tmp_path_factory: pytest.TempPathFactory,
    vllm_spec_server: RunningServer,
    vllm_baseline_server: RunningServer,
) -> Iterator[GatewayServer]:
    snapshot = make_snapshot(
        spec_urls=[vllm_spec_server.base_url],
        baseline_urls=[vllm_baseline_server.base_url],
        capabilities=PairCapabilities(structured_output=True),
    )
    with run_gateway(tmp_path_factory.mktemp("lab"), snapshot) as gw:
        yield gw


def test_leaving_a_speculating_stream_returns_the_engine_to_idle(
    lab_gateway: GatewayServer, vllm_spec_server: RunningServer
) -> None:
    assert vllm_spec_server.speculative
    _wait_idle(vllm_spec_server)
    before = _metric(vllm_spec_server, GENERATED)
    max_tokens = 400
    client = openai.OpenAI(base_url=lab_gateway.base_url + "/v1", api_key=TENANT_KEY, max_retries=0)
    with client.chat.completions.with_streaming_response.create(
        model="tiny",
        messages=[{"role": "user", "content": "def fibonacci(n):"}],
        max_tokens=max_tokens,
        temperature=0.8,
        stream=True,
        extra_body={"ignore_eos": True},
    ) as response:
        assert response.headers["x-specroute-decision"].startswith("arm=spec")
        chunks = 0
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunks += 1
            if chunks == 3:
                break  # leave mid-stream, between one verification step and the next
    # The engine aborts the speculating request: nothing runs, no KV blocks are held.
    idle_after_s = _wait_idle(vllm_spec_server)
    generated = _metric(vllm_spec_server, GENERATED) - before
    print(f"spec engine idle {idle_after_s:.3f} s after the client left; {generated:.0f} tokens")
    assert generated < max_tokens


def test_structured_output_on_the_spec_arm_is_valid_and_equals_the_baseline_arm(
    lab_gateway: GatewayServer,
) -> None:
    # NOTE: a regex grammar (a JSON object of fixed shape): a JSON-schema grammar lets
    # the untrained tiny model spend its whole budget on whitespace inside the object.
    pattern = r'\{"name": "(ann|bob|eve)", "age": [0-9]{1,2}\}'
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "Describe a person as JSON."}],
        "max_tokens": 40,
        "temperature": 0,
        "structured_outputs": {"regex": pattern},
    }
    answers = {}
    for arm, headers in (
        ("spec", {"Authorization": f"Bearer {TENANT_KEY}"}),
        (
            "baseline",
            {"Authorization": f"Bearer {OVERRIDE_KEY}", "x-specroute-speculation": "off"},
        ),
    ):
        response = httpx.post(
            lab_gateway.base_url + "/v1/chat/completions", json=body, headers=headers, timeout=120
        )
        assert response.status_code == 200, response.text
        assert response.headers["x-specroute-decision"].startswith(f"arm={arm}")
        choice = response.json()["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        answers[arm] = choice["message"]["content"]
    # The grammar mask held on the speculating arm (drafted tokens outside it were
    # rejected), and speculation changed nothing at T=0.
    assert re.fullmatch(pattern, answers["spec"]), answers["spec"]
    document = json.loads(answers["spec"])
    assert document["name"] in ("ann", "bob", "eve") and 0 <= document["age"] <= 99
    assert answers["spec"] == answers["baseline"]
