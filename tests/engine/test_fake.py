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
