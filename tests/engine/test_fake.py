"""`specroute engine fake`: the fake engine streams what it is told to, shaped like vLLM."""

import json

import httpx
from typer.testing import CliRunner

from engine.cli import app
from engine.fake import PROMPT_TOKENS, FakeUpstream


async def test_the_fake_streams_its_tokens_and_a_usage_chunk() -> None:
    transport = httpx.ASGITransport(app=FakeUpstream(tokens=3, interval_s=0.0, model="m"))
    async with httpx.AsyncClient(transport=transport, base_url="http://fake") as client:
        body = {"stream": True, "stream_options": {"include_usage": True}}
        response = await client.post("/v1/chat/completions", json=body)
        models = (await client.get("/v1/models")).json()
    assert response.status_code == 200
    events = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    docs = [json.loads(e) for e in events[:-1]]
    deltas = [d["choices"][0]["delta"] for d in docs if d["choices"]]
    tokens = [delta["content"] for delta in deltas if delta]
    assert tokens == [" tok"] * 3
    assert docs[-1]["usage"]["total_tokens"] == PROMPT_TOKENS + 3
    assert docs[-1]["metrics"]["speculative_decoding"]["num_spec_steps"] == 1
    assert models["data"][0]["id"] == "m"


def test_the_command_is_registered_under_engine() -> None:
    result = CliRunner().invoke(app, ["fake", "--help"])
    assert result.exit_code == 0, result.output
    assert "--interval-ms" in result.output and "--tokens" in result.output


async def test_the_fake_without_per_request_metrics_counts_on_its_metrics_instead() -> None:
    from engine.agent.metrics import parse_engine_metrics

    fake = FakeUpstream(tokens=8, interval_s=0.0, per_request_metrics=False, spec_counters=True)
    transport = httpx.ASGITransport(app=fake)
    async with httpx.AsyncClient(transport=transport, base_url="http://fake") as client:
        idle = parse_engine_metrics((await client.get("/metrics")).text)
        body = {"stream": True, "stream_options": {"include_usage": True}}
        streamed = await client.post("/v1/chat/completions", json=body)
        whole = (await client.post("/v1/completions", json={})).json()
        counted = parse_engine_metrics((await client.get("/metrics")).text)
    events = [line[6:] for line in streamed.text.splitlines() if line.startswith("data: ")]
    final = json.loads(events[-2])
    assert "usage" in final and "metrics" not in final and "metrics" not in whole
    assert idle.spec is not None and idle.spec.num_drafts == 0
    # Two responses of 4 steps, histogram [2, 2, 0, 0] each.
    assert counted.spec is not None
    assert (counted.spec.num_drafts, counted.spec.num_draft_tokens) == (8, 24)
    assert counted.spec.accepted_per_position == [4, 0, 0]
    assert counted.spec.num_accepted_tokens == 4 and counted.generation_tokens == 16
    # By default /metrics has the idle gauges only (no speculation), as before.
    plain = httpx.ASGITransport(app=FakeUpstream(tokens=8, interval_s=0.0))
    async with httpx.AsyncClient(transport=plain, base_url="http://fake") as client:
        assert parse_engine_metrics((await client.get("/metrics")).text).spec is None
