"""A tenant's token quota holds against a client that leaves before the usage chunk and
against a burst of concurrent requests (real gateway, real openai client; the engine
is the benchmark's fake upstream, paced so a stream takes a while)."""

import asyncio
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import openai
import pytest
from openai import AsyncOpenAI, OpenAI
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionUserMessageParam

from engine.fake import PROMPT_TOKENS, FakeUpstream
from gateway.quota.memory import InMemoryQuotaLimiter
from specwire import QuotaSpec
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import GatewayServer, run_gateway, serve_app

TOKENS = 16
MESSAGES: list[ChatCompletionMessageParam] = [
    ChatCompletionUserMessageParam(role="user", content="hi")
]


@pytest.fixture
def engine_url() -> Iterator[str]:
    with serve_app(FakeUpstream(TOKENS, 0.02, model="tiny")) as url:
        yield url


def _gateway(tmp_path: Path, engine_url: str, budget: int) -> AbstractContextManager[GatewayServer]:
    snapshot = make_snapshot(spec_urls=[engine_url], baseline_urls=[engine_url])
    snapshot.tenants[0].quota = QuotaSpec(weighted_tokens_per_minute=budget)
    return run_gateway(tmp_path, snapshot)


def _window_total(gw: GatewayServer) -> float:
    quota = gw.state.quota
    assert isinstance(quota, InMemoryQuotaLimiter)
    window = quota._windows.get(1)
    return window.total if window is not None else 0.0


def test_a_client_that_leaves_before_the_usage_chunk_is_charged_what_it_streamed(
    tmp_path: Path, engine_url: str
) -> None:
    with _gateway(tmp_path, engine_url, budget=100) as gw:
        client = OpenAI(base_url=f"{gw.base_url}/v1", api_key=TENANT_KEY, max_retries=0)
        admitted = refused = 0
        for _ in range(15):
            try:
                stream = client.chat.completions.create(
                    model="tiny", messages=MESSAGES, max_tokens=TOKENS, stream=True
                )
            except openai.RateLimitError:
                refused += 1
                continue
            admitted += 1
            for i, _chunk in enumerate(stream):
                if i == 3:
                    break  # leave one chunk early, long before the usage chunk
            stream.close()
        # Each abandoned request costs its prompt (~bytes/4) plus the tokens it streamed:
        # a 100-token budget lets a handful through, not 15 of 15.
        assert admitted <= 5, (admitted, refused)
        assert refused >= 10
        assert _window_total(gw) >= 100


def test_a_finished_stream_is_charged_exactly_its_usage(tmp_path: Path, engine_url: str) -> None:
    with _gateway(tmp_path, engine_url, budget=10_000) as gw:
        client = OpenAI(base_url=f"{gw.base_url}/v1", api_key=TENANT_KEY, max_retries=0)
        text = "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(
                model="tiny", messages=MESSAGES, max_tokens=TOKENS, stream=True
            )
            if c.choices
        )
        assert text == " tok" * TOKENS
        # The reservation (prompt bytes/4 + max_tokens) was replaced by the usage.
        for _ in range(100):  # settled in the background, right after the stream
            if _window_total(gw) == PROMPT_TOKENS + TOKENS:
                break
            time.sleep(0.02)
        assert _window_total(gw) == PROMPT_TOKENS + TOKENS


def test_concurrent_requests_cannot_overshoot_the_budget(tmp_path: Path, engine_url: str) -> None:
    # One request reserves about 16 (max_tokens) + ~20 (prompt bytes / 4): 180 fits 5.
    with _gateway(tmp_path, engine_url, budget=180) as gw:

        async def burst() -> list[int]:
            client = AsyncOpenAI(base_url=f"{gw.base_url}/v1", api_key=TENANT_KEY, max_retries=0)

            async def one() -> int:
                try:
                    await client.chat.completions.create(
                        model="tiny", messages=MESSAGES, max_tokens=TOKENS
                    )
                    return 200
                except openai.RateLimitError:
                    return 429

            try:
                return list(await asyncio.gather(*(one() for _ in range(30))))
            finally:
                await client.close()

        statuses = asyncio.run(burst())
    assert statuses.count(200) <= 6, statuses
    assert statuses.count(200) >= 4
    assert statuses.count(429) == 30 - statuses.count(200)
