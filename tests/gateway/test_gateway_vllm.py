"""The real openai client against the gateway in front of the real tiny vLLM pools.

The two session vLLM servers (tests/fixtures/vllm.py) are shared by every test;
each gateway here is a real uvicorn server routing on a PolicySnapshot file.
"""

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from prometheus_client.parser import text_string_to_metric_families

from gateway.decision.cohort import in_spec_cohort
from gateway.telemetry.positions import POSITION_LABELS, UNKNOWN
from specwire import Arm, QuotaSpec, RolloutState
from tests.fixtures.vllm import RunningServer
from tests.gateway.policy import OVERRIDE_KEY, TENANT_KEY, make_snapshot, stale
from tests.gateway.server import GatewayServer, dead_url, run_gateway

pytestmark = pytest.mark.vllm

PROMPT: list[ChatCompletionMessageParam] = [{"role": "user", "content": "def add(a, b):"}]
SPEC_HEADER = "arm=spec; pair=tiny-v3; k=3; reason=rollout_full"


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


def _client(gw: GatewayServer, key: str = TENANT_KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)


def _engine_metric(server: RunningServer, name: str) -> float:
    text = httpx.get(server.base_url + "/metrics").text
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    ]
    return sum(values)


def test_chat_non_stream_has_text_usage_and_headers(gateway: GatewayServer) -> None:
    raw = _client(gateway).chat.completions.with_raw_response.create(
        model="tiny",
        messages=PROMPT,
        max_tokens=12,
        temperature=0.0,
        extra_headers={"x-request-id": "req-chat-1"},
    )
    completion = raw.parse()
    assert raw.headers["x-specroute-decision"] == SPEC_HEADER
    assert raw.headers["x-request-id"] == "req-chat-1"
    # vLLM builds its id from the X-Request-Id we pass on.
    assert "req-chat-1" in completion.id
    assert completion.choices[0].message.content
    assert completion.usage is not None and completion.usage.completion_tokens == 12
    dumped = completion.model_dump()
    assert "metrics" not in dumped and "prompt_token_ids" not in dumped
    assert "stop_reason" not in dumped["choices"][0]


def test_spec_arm_greedy_output_equals_baseline_arm(gateway: GatewayServer) -> None:
    client = _client(gateway, OVERRIDE_KEY)
    texts: dict[str, str] = {}
    for arm in ("on", "off"):
        raw = client.chat.completions.with_raw_response.create(
            model="tiny",
            messages=PROMPT,
            max_tokens=40,
            temperature=0.0,
            extra_headers={"x-specroute-speculation": arm},
        )
        expected = "arm=spec; pair=tiny-v3; k=3" if arm == "on" else "arm=baseline"
        assert raw.headers["x-specroute-decision"].startswith(expected)
        assert raw.headers["x-specroute-decision"].endswith("reason=override_header")
        content = raw.parse().choices[0].message.content
        assert content
        texts[arm] = content
    assert texts["on"] == texts["off"]


def test_stream_forwards_chunks_strips_metrics_and_usage_unless_asked(
    gateway: GatewayServer,
) -> None:
    client = _client(gateway)
    full = client.chat.completions.create(
        model="tiny",
        messages=PROMPT,
        max_tokens=16,
        temperature=0.0,
    )
    with client.chat.completions.with_streaming_response.create(
        model="tiny",
        messages=PROMPT,
        max_tokens=16,
        temperature=0.0,
        stream=True,
    ) as resp:
        assert resp.headers["x-specroute-decision"] == SPEC_HEADER
        assert resp.headers["content-type"].startswith("text/event-stream")
        chunks = list(resp.parse())
    assert all(c.usage is None for c in chunks)
    assert all("metrics" not in c.model_dump() for c in chunks)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == full.choices[0].message.content

    chunks = list(
        client.chat.completions.create(
            model="tiny",
            messages=PROMPT,
            max_tokens=16,
            temperature=0.0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 16
    assert "metrics" not in chunks[-1].model_dump()


async def test_async_client_completions_stream_and_not(gateway: GatewayServer) -> None:
    client = openai.AsyncOpenAI(
        base_url=gateway.base_url + "/v1", api_key=TENANT_KEY, max_retries=0
    )
    try:
        whole = await client.completions.create(
            model="tiny", prompt="def add(a, b):", max_tokens=10, temperature=0.0
        )
        stream = await client.completions.create(
            model="tiny",
            prompt="def add(a, b):",
            max_tokens=10,
            temperature=0.0,
            stream=True,
            stream_options={"include_usage": True},
        )
        parts = [c async for c in stream]
    finally:
        await client.close()
    assert whole.usage is not None and whole.usage.completion_tokens == 10
    assert "".join(p.choices[0].text for p in parts if p.choices) == whole.choices[0].text
    assert (
        parts[-1].usage is not None and parts[-1].usage.prompt_tokens == whole.usage.prompt_tokens
    )


def test_telemetry_record_carries_engine_spec_metrics(gateway: GatewayServer) -> None:
    gateway.state.aggregator.drain_all()
    _client(gateway).chat.completions.create(
        model="tiny",
        messages=PROMPT,
        max_tokens=24,
        temperature=0.0,
        stream=True,
    ).close()
    stream = _client(gateway).chat.completions.create(
        model="tiny",
        messages=PROMPT,
        max_tokens=24,
        temperature=0.0,
        stream=True,
    )
    for _ in stream:
        pass
    deadline = time.monotonic() + 5.0
    windows = []
    while time.monotonic() < deadline:
        windows += [w for b in gateway.state.aggregator.drain_all() for w in b.windows]
        if any(w.arm is Arm.SPEC and w.requests and w.drafts for w in windows):
            break
        time.sleep(0.05)
    spec = [w for w in windows if w.arm is Arm.SPEC]
    assert sum(w.completion_tokens for w in spec) >= 24
    assert sum(w.drafts for w in spec) > 0
    assert sum(w.drafted_tokens for w in spec) >= sum(w.accepted_tokens for w in spec)
    assert spec[0].pair_version_id == 7 and spec[0].rollout_id == 11
    # Each request's load at dispatch, its end-to-end time per token and its acceptance
    # moments, from the engine's own per-request spec metrics.
    dispatched = sum(w.load.dispatched for w in spec)
    assert dispatched == sum(w.requests for w in spec) >= 2
    assert sum(s.requests for w in spec for s in w.by_load) == dispatched
    assert all(s.e2e_per_token.sum_log is not None for w in spec for s in w.by_load)
    # A request the client closed early ends without the engine's usage chunk, so only
    # completed requests carry acceptance moments.
    moments = [w.request_acceptance for w in spec]
    cancelled = sum(w.cancellations for w in spec)
    assert sum(m.requests for m in moments) == dispatched - cancelled >= 1
    assert sum(m.accepted for m in moments) == sum(w.accepted_tokens for w in spec)
    assert sum(m.judged for m in moments) >= sum(m.accepted for m in moments) > 0


def test_fallback_to_baseline_when_spec_engine_is_down(
    tmp_path: Path, vllm_baseline_server: RunningServer
) -> None:
    snapshot = make_snapshot(spec_urls=[dead_url()], baseline_urls=[vllm_baseline_server.base_url])
    with run_gateway(tmp_path, snapshot) as gw:
        raw = _client(gw).chat.completions.with_raw_response.create(
            model="tiny",
            messages=PROMPT,
            max_tokens=5,
            temperature=0.0,
        )
        assert raw.headers["x-specroute-decision"] == "arm=baseline; reason=pool_unavailable"
        assert raw.parse().usage.completion_tokens == 5  # type: ignore[union-attr]
        # A request forced to the baseline is not the rollout's evidence: no rollout id.
        windows = gw.windows(requests=1)
        assert [(w.arm, w.rollout_id) for w in windows] == [(Arm.BASELINE, None)]


def test_fallback_to_spec_when_baseline_engine_is_down(
    tmp_path: Path, vllm_spec_server: RunningServer
) -> None:
    snapshot = make_snapshot(
        spec_urls=[vllm_spec_server.base_url],
        baseline_urls=[dead_url()],
        state=RolloutState.PAUSED,
    )
    with run_gateway(tmp_path, snapshot) as gw:
        chunks = list(
            _client(gw).chat.completions.create(
                model="tiny",
                messages=PROMPT,
                max_tokens=5,
                temperature=0.0,
                stream=True,
            )
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        resp = httpx.post(
            gw.base_url + "/v1/chat/completions",
            json={"model": "tiny", "messages": PROMPT, "max_tokens": 3},
            headers={"Authorization": f"Bearer {TENANT_KEY}"},
        )
        assert resp.headers["x-specroute-decision"] == (
            "arm=spec; pair=tiny-v3; k=3; reason=pool_unavailable"
        )


def test_stale_snapshot_serves_from_baseline(
    tmp_path: Path, vllm_spec_server: RunningServer, vllm_baseline_server: RunningServer
) -> None:
    snapshot = stale(
        make_snapshot(
            spec_urls=[vllm_spec_server.base_url], baseline_urls=[vllm_baseline_server.base_url]
        )
    )
    with run_gateway(tmp_path, snapshot) as gw:
        raw = _client(gw).chat.completions.with_raw_response.create(
            model="tiny",
            messages=PROMPT,
            max_tokens=4,
            temperature=0.0,
        )
        assert raw.headers["x-specroute-decision"] == "arm=baseline; reason=snapshot_stale"
        assert raw.parse().choices[0].message.content


def test_first_token_timeout_is_504(tmp_path: Path, vllm_baseline_server: RunningServer) -> None:
    snapshot = make_snapshot(spec_urls=[], baseline_urls=[vllm_baseline_server.base_url])
    # Held headers: whether 1 ms runs out before vLLM's headers or after them, it is a 504
    # (tests/gateway/test_first_token.py covers the default, an error event after them).
    with run_gateway(
        tmp_path, snapshot, first_token_timeout_s=0.001, hold_stream_headers=True
    ) as gw:
        with pytest.raises(openai.APIStatusError) as info:
            _client(gw).chat.completions.create(
                model="tiny",
                messages=PROMPT,
                max_tokens=50,
                stream=True,
            )
        assert info.value.status_code == 504
        assert info.value.response.json()["error"]["type"] == "timeout_error"
        assert info.value.response.headers["x-specroute-decision"] == (
            "arm=baseline; reason=pool_unavailable"
        )


def _stream_completion(
    gw: GatewayServer, prompt: str, max_tokens: int
) -> AbstractContextManager[httpx.Response]:
    """A raw streamed completion of exactly `max_tokens` tokens (EOS ignored)."""
    return httpx.stream(
        "POST",
        gw.base_url + "/v1/completions",
        json={
            "model": "tiny",
            "prompt": prompt,
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "stream": True,
        },
        headers={"Authorization": f"Bearer {TENANT_KEY}"},
    )


def _tokens_when_idle(engine: RunningServer, timeout_s: float = 10.0) -> tuple[float, float]:
    """The engine's generated-token counter once it stopped moving, and when it last moved.

    NOTE: the counter, not vllm:num_requests_running: that gauge lags the stream
    (it read 0 while the engine was still generating for this very request)."""
    started = time.monotonic()
    last_value, last_change = _engine_metric(engine, "vllm:generation_tokens_total"), started
    while time.monotonic() - last_change < 0.5:
        assert time.monotonic() - started < timeout_s, "the engine never went idle"
        time.sleep(0.05)
        value = _engine_metric(engine, "vllm:generation_tokens_total")
        if value != last_value:
            last_value, last_change = value, time.monotonic()
    return last_value, last_change - started


def _disconnect_mid_generation(
    gw: GatewayServer, engine: RunningServer, max_tokens: int
) -> tuple[float, float]:
    """Stream a long completion and drop the connection after its first event.

    Returns the tokens the engine generated for it and how long after the
    disconnect it stopped generating."""
    before, _ = _tokens_when_idle(engine)
    with _stream_completion(gw, "def add(a, b):", max_tokens) as resp:
        assert resp.status_code == 200
        first = next(resp.iter_lines())
        assert first.startswith("data: ")  # the engine is generating this request
    after, stopped_s = _tokens_when_idle(engine)
    return after - before, stopped_s


def test_client_disconnect_aborts_the_engine_request(
    tmp_path: Path, vllm_baseline_server: RunningServer
) -> None:
    snapshot = make_snapshot(spec_urls=[], baseline_urls=[vllm_baseline_server.base_url])
    max_tokens = 480
    with run_gateway(tmp_path, snapshot) as gw:
        # NOTE: a try only proves something if the engine was still generating
        # when the client left. On a loaded 2-core machine the client can be
        # descheduled long enough for the whole completion to finish first, which
        # looks exactly like an abort that did not happen; so a try that made
        # every token is repeated. A gateway that never aborts fails all three.
        for _attempt in range(3):
            generated, stopped_s = _disconnect_mid_generation(gw, vllm_baseline_server, max_tokens)
            if generated < max_tokens:
                break
        # Wait until the gateway has accounted every try, then count them.
        windows = gw.windows(requests=_attempt + 1)
    print(f"engine stopped {stopped_s:.3f}s after disconnect; {generated:.0f}/{max_tokens} made")
    assert generated < max_tokens, f"engine generated {generated} tokens: not aborted"
    # The gateway accounts the request as cancelled, not as an error or a success.
    # (A wasted try whose tokens all reached the gateway may count as served.)
    assert sum(w.requests for w in windows) == _attempt + 1
    assert sum(w.cancellations for w in windows) >= 1
    assert sum(w.errors for w in windows) == 0


def test_quota_exhaustion_is_429_with_retry_after(
    tmp_path: Path, vllm_baseline_server: RunningServer
) -> None:
    snapshot = make_snapshot(spec_urls=[], baseline_urls=[vllm_baseline_server.base_url])
    acme = snapshot.tenants[0]
    acme.quota = QuotaSpec(weighted_tokens_per_minute=30)
    with run_gateway(tmp_path, snapshot) as gw:
        client = _client(gw)
        client.chat.completions.create(model="tiny", messages=PROMPT, max_tokens=32)
        deadline = time.monotonic() + 5.0
        while True:
            try:
                client.chat.completions.create(model="tiny", messages=PROMPT, max_tokens=1)
            except openai.RateLimitError as exc:
                assert int(exc.response.headers["retry-after"]) >= 1
                assert exc.response.json()["error"]["type"] == "rate_limit_error"
                # Refused before routing: the header names the decision that was made.
                assert exc.response.headers["x-specroute-decision"] == SPEC_HEADER
                break
            assert time.monotonic() < deadline, "quota never refused"
            time.sleep(0.05)
        # Another tenant is not affected.
        ok = _client(gw, OVERRIDE_KEY).chat.completions.create(
            model="tiny",
            messages=PROMPT,
            max_tokens=1,
        )
        assert ok.usage is not None


async def test_concurrent_streams_through_async_client(gateway: GatewayServer) -> None:
    client = openai.AsyncOpenAI(
        base_url=gateway.base_url + "/v1", api_key=TENANT_KEY, max_retries=0
    )

    async def one(i: int) -> str:
        stream = await client.chat.completions.create(
            model="tiny",
            messages=PROMPT,
            max_tokens=8,
            temperature=0.0,
            stream=True,
            user=f"user-{i}",
        )
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    try:
        texts = await asyncio.gather(*(one(i) for i in range(8)))
    finally:
        await client.close()
    assert len(set(texts)) == 1 and texts[0]
    assert gateway.state.balancer.outstanding("p1-w0") == 0


def test_cohorts_are_sticky_across_replicas_and_restarts(
    tmp_path: Path, vllm_spec_server: RunningServer, vllm_baseline_server: RunningServer
) -> None:
    snapshot = make_snapshot(
        spec_urls=[vllm_spec_server.base_url],
        baseline_urls=[vllm_baseline_server.base_url],
        percentage=50.0,
        state=RolloutState.RAMPING,
    )
    body = {"model": "tiny", "messages": PROMPT, "max_tokens": 1}
    auth = {"Authorization": f"Bearer {TENANT_KEY}"}

    def arms(gw: GatewayServer) -> list[str]:
        out = []
        for i in range(12):
            # Half the users are keyed by the OpenAI `user` field, half by the session header.
            if i % 2:
                resp = httpx.post(
                    gw.base_url + "/v1/chat/completions",
                    json=body | {"user": f"u{i}"},
                    headers=auth,
                )
            else:
                resp = httpx.post(
                    gw.base_url + "/v1/chat/completions",
                    json=body,
                    headers=auth | {"x-specroute-session": f"u{i}"},
                )
            assert resp.status_code == 200, resp.text
            out.append(resp.headers["x-specroute-decision"])
        return out

    with run_gateway(tmp_path / "a", snapshot) as a, run_gateway(tmp_path / "b", snapshot) as b:
        first, replica = arms(a), arms(b)
    with run_gateway(tmp_path / "c", snapshot) as restarted:
        after_restart = arms(restarted)
    assert first == replica == after_restart
    # And exactly what the pure bucket rule says for these users.
    expected = [in_spec_cohort("salt-1", "acme", f"u{i}", 50.0) for i in range(12)]
    assert [h.startswith("arm=spec") for h in first] == expected
    assert {h.split(";")[0] for h in first} == {"arm=spec", "arm=baseline"}
    assert all(h.endswith(("reason=cohort_spec", "reason=cohort_baseline")) for h in first)


def test_incompatible_parameter_goes_to_baseline_unchanged(gateway: GatewayServer) -> None:
    raw = _client(gateway).chat.completions.with_raw_response.create(
        model="tiny",
        messages=PROMPT,
        max_tokens=6,
        temperature=0.0,
        logit_bias={"5": 2},
    )
    assert raw.headers["x-specroute-decision"] == (
        "arm=baseline; reason=incompatible_parameter; param=logit_bias"
    )
    assert raw.parse().usage.completion_tokens == 6  # type: ignore[union-attr]


def test_engine_rejection_is_relayed_as_a_4xx(gateway: GatewayServer) -> None:
    # The tiny pools run with max-model-len 512: the engine itself refuses this.
    with pytest.raises(openai.BadRequestError) as info:
        _client(gateway).chat.completions.create(model="tiny", messages=PROMPT, max_tokens=100_000)
    assert info.value.status_code == 400
    assert info.value.response.json()["error"]["type"] == "invalid_request_error"
    assert info.value.response.headers["x-specroute-decision"] == SPEC_HEADER


def test_idle_gap_mid_stream_ends_with_a_timeout_event(
    tmp_path: Path, vllm_baseline_server: RunningServer
) -> None:
    snapshot = make_snapshot(spec_urls=[], baseline_urls=[vllm_baseline_server.base_url])
    # 0.1 ms between engine chunks is shorter than any real decode step: a real timeout.
    with run_gateway(tmp_path, snapshot, idle_timeout_s=0.0001) as gw:
        with _stream_completion(gw, "x", 200) as resp:
            assert resp.status_code == 200  # the first token came in time
            events = [line for line in resp.iter_lines() if line.startswith("data: ")]
        windows = gw.windows()
    assert json.loads(events[-1].removeprefix("data: "))["error"]["code"] == "idle_timeout"
    assert len(events) < 200
    assert [(w.requests, w.errors) for w in windows] == [(1, 1)]


def test_a_pair_version_is_not_served_by_spec_engines_of_another_release(
    tmp_path: Path, vllm_spec_server: RunningServer, vllm_baseline_server: RunningServer
) -> None:
    # The version the real spec engine reports about itself (vLLM's /version).
    running = httpx.get(f"{vllm_spec_server.base_url}/version", timeout=10).json()["version"]
    decisions = {}
    for label, pair_version in (("same", running), ("other", "0.31.0")):
        snapshot = make_snapshot(
            spec_urls=[vllm_spec_server.base_url],
            baseline_urls=[vllm_baseline_server.base_url],
            pair_engine_version=pair_version,
            spec_engine_versions=[running],
        )
        with run_gateway(tmp_path / label, snapshot) as gw:
            raw = _client(gw).chat.completions.with_raw_response.create(
                model="tiny", messages=PROMPT, max_tokens=6, temperature=0.0
            )
            assert raw.parse().usage.completion_tokens == 6  # type: ignore[union-attr]
            decisions[label] = raw.headers["x-specroute-decision"]
    assert decisions["same"].startswith("arm=spec")
    assert decisions["other"] == "arm=baseline; reason=engine_version_mismatch"


def test_acceptance_by_response_position_adds_up_to_the_spec_totals(
    gateway: GatewayServer,
) -> None:
    """The launcher's `detailed` per-request metrics give every verify step a response
    position; the gateway's buckets add up to its drafted and accepted totals."""

    def samples() -> dict[tuple[str, str], float]:
        text = httpx.get(gateway.base_url + "/metrics").text
        out: dict[tuple[str, str], float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name.startswith("specroute_gateway_spec_") and s.name.endswith("_total"):
                    key = (s.name, s.labels.get("position_bucket", ""))
                    out[key] = out.get(key, 0.0) + s.value
        return out

    before = samples()
    # 80 tokens: verify steps begin in the 0-15 bucket and past it.
    _client(gateway).completions.create(
        model="tiny", prompt="def add(a, b):\n", max_tokens=80, temperature=0.0
    )
    after = samples()

    def delta(name: str, bucket: str = "") -> float:
        key = (f"specroute_gateway_spec_{name}_total", bucket)
        return after.get(key, 0.0) - before.get(key, 0.0)

    drafted = {b: delta("drafted_tokens_by_response_position", b) for b in POSITION_LABELS}
    accepted = {b: delta("accepted_tokens_by_response_position", b) for b in POSITION_LABELS}
    assert delta("drafted_tokens") > 0
    assert sum(drafted.values()) == delta("drafted_tokens")
    assert sum(accepted.values()) == delta("accepted_tokens")
    assert delta("drafted_tokens_by_response_position", UNKNOWN) == 0
    assert drafted["0-15"] > 0 and drafted["16-63"] > 0 and drafted["256+"] == 0
    assert all(accepted[b] <= drafted[b] for b in POSITION_LABELS)
