"""The output contract in production, through the real gateway in front of the real
tiny vLLM pools: greedy requests answered by both arms in the background compare equal
on a correct pair, and the guard's test stays quiet; with the spec arm's sampler
mis-set (a proxy that turns its greedy requests into T=1 ones: the fault stands for a
logits processor or sampler setting applied on one arm only, which no correct engine
build produces on demand) the pairs differ and the same test alarms within two
windows, naming the unequal request ids. At T=1 the sampled pairs split both ways on
the correct pair, and a spec arm that samples at T=0.3 (the same kind of fault) makes
its completions the target's likelier ones until the sign test alarms."""

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import openai
import pytest
from fastapi import FastAPI, Request, Response

from control.automation.budget import family_alpha
from control.automation.contract import ContractGuard, contract_guard
from control.models import ThresholdSet
from specwire import OutputContractCounts, RolloutState
from tests.fixtures.vllm import RunningServer
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import GatewayServer, run_gateway, serve_app

pytestmark = pytest.mark.vllm

PER_WINDOW = 4
PROMPTS = ["def add(a, b):", "class Stack:", "import os\n", "for i in range(", "x = [", "# sort"]
THRESHOLDS = ThresholdSet(
    contract_max_mismatch=0.01, contract_sampled_margin=0.15, false_alarm_rate=0.01
)


@contextmanager
def rewriting_proxy(upstream: str, rewrite: Callable[[dict[str, Any]], None]) -> Iterator[str]:
    """A proxy to `upstream` that passes every JSON request body through `rewrite`."""
    app = FastAPI()
    client = httpx.AsyncClient(base_url=upstream, timeout=120)

    @app.api_route("/{path:path}", methods=["GET", "POST"])
    async def forward(path: str, request: Request) -> Response:
        body: Any = await request.body()
        if request.method == "POST" and body:
            doc = await request.json()
            rewrite(doc)
            body = httpx.Request("POST", "/", json=doc).content
        upstream_response = await client.request(
            request.method, "/" + path, content=body, headers={"content-type": "application/json"}
        )
        return Response(upstream_response.content, upstream_response.status_code)

    with serve_app(app) as url:
        yield url


def mis_set_sampler(doc: dict[str, Any]) -> None:
    """Every greedy request sampled at temperature 1."""
    if doc.get("temperature") == 0:
        doc["temperature"] = 1.0


def cold_sampler(doc: dict[str, Any]) -> None:
    """Every T > 0 request sampled at T=0.3: the fault stands for a temperature or
    logits processor applied on one arm only."""
    if doc.get("temperature", 1.0) > 0:
        doc["temperature"] = 0.3


def _send_window(gw: GatewayServer, window: int) -> list[str]:
    client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=TENANT_KEY, max_retries=0)
    ids = []
    for i in range(PER_WINDOW):
        rid = f"pc-{window}-{i}"
        client.completions.create(
            model="tiny",
            prompt=PROMPTS[(window * PER_WINDOW + i) % len(PROMPTS)],
            max_tokens=16,
            temperature=0.0,
            extra_headers={"x-request-id": rid},
        )
        ids.append(rid)
    return ids


def _counts(gw: GatewayServer, checks: int, timeout_s: float = 120.0) -> OutputContractCounts:
    """Drain the telemetry until `checks` paired checks have finished; their sum."""
    total = OutputContractCounts()
    deadline = time.monotonic() + timeout_s
    while total.checks < checks:
        assert time.monotonic() < deadline, f"paired checks incomplete: {total}"
        for batch in gw.state.aggregator.drain_all():
            for w in batch.windows:
                for name, value in w.output_contract:
                    setattr(total, name, getattr(total, name) + value)
        time.sleep(0.05)
    return total


def _run(gw: GatewayServer, windows: int) -> tuple[list[OutputContractCounts], ContractGuard]:
    seen: list[OutputContractCounts] = []
    guard = None
    for window in range(windows):
        _send_window(gw, window)
        seen.append(_counts(gw, PER_WINDOW))
        guard = contract_guard(seen, THRESHOLDS, family_alpha(THRESHOLDS))
        assert guard is not None
        if guard.test.alarm:
            break
    assert guard is not None
    return seen, guard


def _snapshot(spec_url: str, baseline_url: str) -> Any:
    return make_snapshot(
        spec_urls=[spec_url],
        baseline_urls=[baseline_url],
        state=RolloutState.CANARY,
        percentage=50.0,
        contract_percentage=100.0,
    )


def test_a_correct_pair_answers_greedy_requests_alike(
    tmp_path_factory: pytest.TempPathFactory,
    vllm_spec_server: RunningServer,
    vllm_baseline_server: RunningServer,
) -> None:
    snapshot = _snapshot(vllm_spec_server.base_url, vllm_baseline_server.base_url)
    with run_gateway(tmp_path_factory.mktemp("gw-pairs"), snapshot, shadow_max_inflight=16) as gw:
        seen, guard = _run(gw, windows=2)
        equal = gw.state.metrics.registry.get_sample_value(
            "specroute_gateway_contract_pairs_total", {"outcome": "equal"}
        )
    assert len(seen) == 2 and not guard.test.alarm
    assert (guard.pairs, guard.equal, guard.incomplete) == (2 * PER_WINDOW, 2 * PER_WINDOW, 0)
    assert guard.equal_share == 1.0 and guard.mismatched_ids == []
    assert equal == 2 * PER_WINDOW


def test_a_spec_arm_with_a_mis_set_sampler_is_caught_within_two_windows(
    tmp_path_factory: pytest.TempPathFactory,
    vllm_spec_server: RunningServer,
    vllm_baseline_server: RunningServer,
) -> None:
    with rewriting_proxy(vllm_spec_server.base_url, mis_set_sampler) as broken:
        snapshot = _snapshot(broken, vllm_baseline_server.base_url)
        with run_gateway(
            tmp_path_factory.mktemp("gw-broken"), snapshot, shadow_max_inflight=16
        ) as gw:
            seen, guard = _run(gw, windows=3)
    assert guard.test.alarm and len(seen) <= 2, guard
    assert guard.pairs - guard.equal >= 3
    assert guard.equal_share is not None and guard.equal_share < 0.5
    assert set(guard.mismatched_ids) <= {f"pc-{w}-{i}" for w in range(2) for i in range(4)}
    assert len(guard.mismatched_ids) == guard.pairs - guard.equal


SAMPLED_PER_WINDOW = 8


def _sampled_run(gw: GatewayServer, windows: int) -> tuple[int, ContractGuard]:
    """Send T=1 windows until the guard alarms or `windows` ran: (windows, guard)."""
    client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=TENANT_KEY, max_retries=0)
    seen: list[OutputContractCounts] = []
    for window in range(windows):
        for i in range(SAMPLED_PER_WINDOW):
            client.completions.create(
                model="tiny",
                prompt=PROMPTS[(window * SAMPLED_PER_WINDOW + i) % len(PROMPTS)],
                max_tokens=16,
                temperature=1.0,
                extra_headers={"x-request-id": f"ps-{window}-{i}"},
            )
        seen.append(_counts(gw, SAMPLED_PER_WINDOW))
        guard = contract_guard(seen, THRESHOLDS, family_alpha(THRESHOLDS))
        assert guard is not None
        if guard.alarm or len(seen) == windows:
            return len(seen), guard
    raise AssertionError("no window ran")


def test_sampled_pairs_on_a_correct_pair_split_and_a_cold_spec_sampler_is_caught(
    tmp_path_factory: pytest.TempPathFactory,
    vllm_spec_server: RunningServer,
    vllm_baseline_server: RunningServer,
) -> None:
    snapshot = _snapshot(vllm_spec_server.base_url, vllm_baseline_server.base_url)
    with run_gateway(tmp_path_factory.mktemp("gw-sampled"), snapshot, shadow_max_inflight=16) as gw:
        ran, guard = _sampled_run(gw, windows=3)
    # Lossless: both directions occur and no test alarms.
    assert ran == 3 and not guard.alarm, guard
    assert guard.incomplete == 0 and guard.sampled_spec_higher > 0 and guard.sampled_spec_lower > 0

    with rewriting_proxy(vllm_spec_server.base_url, cold_sampler) as broken:
        snapshot = _snapshot(broken, vllm_baseline_server.base_url)
        with run_gateway(
            tmp_path_factory.mktemp("gw-cold"), snapshot, shadow_max_inflight=16
        ) as gw:
            ran, guard = _sampled_run(gw, windows=8)
    assert guard.alarm
    assert guard.sampled_higher_test.alarm, guard
    assert guard.sampled_higher_share is not None and guard.sampled_higher_share > 0.8
    assert set(guard.sampled_higher_ids) <= {
        f"ps-{w}-{i}" for w in range(ran) for i in range(SAMPLED_PER_WINDOW)
    }
