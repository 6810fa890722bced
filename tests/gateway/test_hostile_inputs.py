"""Hypothesis-generated hostile bodies through the gateway to the real engine: never a 5xx.

Whatever passes the gateway's validation goes on to vLLM, so this also proves
the gateway rejects what would make the engine fail with a 500.
"""

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.vllm import RunningServer
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import GatewayServer, run_gateway

pytestmark = pytest.mark.vllm

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
# Values that keep generation short when they are valid, and every kind of wrong otherwise.
small_or_hostile = st.integers(min_value=1, max_value=4) | json_values
messages = (
    st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "system", "assistant"]) | json_values},
            optional={"content": st.text(max_size=30) | json_values, "name": json_values},
        ),
        max_size=3,
    )
    | json_values
)
OPTIONAL_PARAMS: dict[str, st.SearchStrategy[Any]] = {
    name: json_values | st.floats(min_value=-3, max_value=3)
    for name in (
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        "seed",
        "stop",
        "logit_bias",
        "response_format",
        "stream_options",
        "user",
        "logprobs",
        "top_logprobs",
    )
}
OPTIONAL_PARAMS |= {"stream": st.booleans() | json_values, "n": small_or_hostile}
chat_bodies = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["tiny"]) | json_values,
        "messages": messages,
        "max_tokens": small_or_hostile,
    },
    optional=OPTIONAL_PARAMS,
)
completion_bodies = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["tiny"]) | json_values,
        "prompt": st.text(max_size=30) | st.lists(st.integers(-5, 70000), max_size=5) | json_values,
        "max_tokens": small_or_hostile,
    },
    optional=OPTIONAL_PARAMS | {"echo": json_values},
)


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory,
    vllm_spec_server: RunningServer,
    vllm_baseline_server: RunningServer,
) -> Iterator[GatewayServer]:
    snapshot = make_snapshot(
        spec_urls=[vllm_spec_server.base_url], baseline_urls=[vllm_baseline_server.base_url]
    )
    with run_gateway(tmp_path_factory.mktemp("gw"), snapshot) as gw:
        yield gw


def _check(resp: httpx.Response, sent: object) -> None:
    assert resp.status_code < 500, (resp.status_code, resp.text[:500], sent)
    if resp.status_code >= 400:
        assert set(resp.json()["error"]) >= {"message", "type", "code"}


HYPO = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@HYPO
@given(body=chat_bodies)
def test_chat_bodies_never_5xx(gateway: GatewayServer, body: dict[str, Any]) -> None:
    resp = httpx.post(
        gateway.base_url + "/v1/chat/completions",
        content=json.dumps(body),
        headers={"Authorization": f"Bearer {TENANT_KEY}", "content-type": "application/json"},
        timeout=60.0,
    )
    _check(resp, body)


@HYPO
@given(body=completion_bodies)
def test_completion_bodies_never_5xx(gateway: GatewayServer, body: dict[str, Any]) -> None:
    resp = httpx.post(
        gateway.base_url + "/v1/completions",
        content=json.dumps(body),
        headers={"Authorization": f"Bearer {TENANT_KEY}", "content-type": "application/json"},
        timeout=60.0,
    )
    _check(resp, body)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    raw=st.binary(max_size=200),
    headers=st.dictionaries(
        st.sampled_from(
            ["x-request-id", "x-specroute-task", "x-specroute-session", "content-type"]
        ),
        # Stripped: HTTP itself forbids leading/trailing blanks, the client would refuse to send.
        st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=300).map(
            str.strip
        ),
    ),
)
def test_raw_bytes_and_odd_headers_never_5xx(
    gateway: GatewayServer, raw: bytes, headers: dict[str, str]
) -> None:
    resp = httpx.post(
        gateway.base_url + "/v1/chat/completions",
        content=raw,
        headers={"Authorization": f"Bearer {TENANT_KEY}", **headers},
        timeout=60.0,
    )
    _check(resp, raw)
