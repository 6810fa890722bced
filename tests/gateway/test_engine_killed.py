"""A speculating engine that dies for real (SIGKILL) under the gateway.

The engine here is a test-owned vLLM server on the bundled pair, not the
session's shared one, so it can be killed. A stream that was already relaying
ends with a typed error event (never a silent truncation, never a switch of
engines mid-stream); the requests after it fall back to the baseline pool.
"""

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from engine.pools.local import tiny_spec_pool
from tests.fixtures.vllm import RunningServer, require_tiny_pair, start_tiny_server
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import GatewayServer, run_gateway

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

SPEC_HEADER = "arm=spec; pair=tiny-v3; k=3; reason=rollout_full"
FALLBACK_HEADER = "arm=baseline; reason=pool_unavailable"


@pytest.fixture(scope="module")
def doomed_spec_server(vllm_log_dir: Path) -> Iterator[RunningServer]:
    server = start_tiny_server(tiny_spec_pool(require_tiny_pair()), vllm_log_dir, core_index=0)
    try:
        yield server
    finally:
        server.stop()


def _post(gw: GatewayServer, max_tokens: int) -> httpx.Response:
    return httpx.post(
        gw.base_url + "/v1/completions",
        json={"model": "tiny", "prompt": "def add(a, b):", "max_tokens": max_tokens},
        headers={"Authorization": f"Bearer {TENANT_KEY}"},
        timeout=60,
    )


def test_killed_spec_engine_breaks_the_live_stream_then_traffic_falls_back(
    tmp_path: Path, doomed_spec_server: RunningServer, vllm_baseline_server: RunningServer
) -> None:
    snapshot = make_snapshot(
        spec_urls=[doomed_spec_server.base_url], baseline_urls=[vllm_baseline_server.base_url]
    )
    with run_gateway(tmp_path, snapshot) as gw:
        before = _post(gw, 4)
        assert before.status_code == 200
        assert before.headers["x-specroute-decision"] == SPEC_HEADER

        client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=TENANT_KEY, max_retries=0)
        stream = client.completions.create(
            model="tiny",
            prompt="def add(a, b):",
            max_tokens=480,
            stream=True,
            extra_body={"ignore_eos": True},
        )
        texts: list[str] = []
        with pytest.raises(openai.APIError) as broken:
            for chunk in stream:
                texts.append(chunk.choices[0].text if chunk.choices else "")
                if len(texts) == 3:
                    doomed_spec_server.server.kill()
        # Tokens already relayed stay relayed; the end is a typed error, not a truncation.
        assert len(texts) >= 3
        assert len(texts) < 480
        assert "stream broke" in str(broken.value.message)

        # The next requests go to the baseline pool, before their first byte.
        after = [_post(gw, 4) for _ in range(3)]
        assert [r.status_code for r in after] == [200, 200, 200]
        assert {r.headers["x-specroute-decision"] for r in after} == {FALLBACK_HEADER}
        assert all(r.json()["usage"]["completion_tokens"] == 4 for r in after)

        totals: dict[str, list[int]] = {}
        deadline = time.monotonic() + 5.0
        while totals.get("baseline", [0, 0])[0] < 3 and time.monotonic() < deadline:
            for w in (w for b in gw.state.aggregator.drain_all() for w in b.windows):
                t = totals.setdefault(str(w.arm), [0, 0])
                t[0] += w.requests
                t[1] += w.errors
            time.sleep(0.05)
        # The broken stream counts as an error of the spec arm, the fallbacks as baseline.
        assert totals["spec"] == [2, 1]
        assert totals["baseline"] == [3, 0]
