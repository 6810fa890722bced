"""The shadow stage through the real gateway in front of the real tiny vLLM pools.

A rollout in shadow serves every caller from the baseline arm; a sampled share of
its requests is mirrored to the spec pool, the response discarded, never charged
to the tenant's quota, cancelled over its budget and capped in flight. The mirrors
are the rollout's spec-arm telemetry (what the automation judges).
"""

import asyncio
import time
from collections.abc import Iterator

import openai
import pytest

from gateway.quota.limiter import weighted_cost
from specwire import Arm, PolicySnapshot, QuotaSpec, RolloutState, TelemetryWindow
from tests.fixtures.vllm import RunningServer
from tests.gateway.policy import ROLLOUT_ID, TENANT_KEY, make_snapshot
from tests.gateway.server import GatewayServer, run_gateway

pytestmark = pytest.mark.vllm

SHADOW_HEADER = "arm=baseline; reason=shadow"


def _shadow_snapshot(
    spec: RunningServer, baseline: RunningServer, percentage: float = 100.0
) -> PolicySnapshot:
    snapshot = make_snapshot(
        spec_urls=[spec.base_url],
        baseline_urls=[baseline.base_url],
        state=RolloutState.SHADOW,
        percentage=percentage,
    )
    # A quota, so every charge is counted (unlimited tenants are never charged).
    snapshot.tenants[0].quota = QuotaSpec(weighted_tokens_per_minute=10_000_000)
    return snapshot


@pytest.fixture
def shadow_gateway(
    tmp_path_factory: pytest.TempPathFactory,
    vllm_spec_server: RunningServer,
    vllm_baseline_server: RunningServer,
) -> Iterator[GatewayServer]:
    snapshot = _shadow_snapshot(vllm_spec_server, vllm_baseline_server)
    with run_gateway(tmp_path_factory.mktemp("gw-shadow"), snapshot, shadow_max_inflight=16) as gw:
        yield gw


def _client(gw: GatewayServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url + "/v1", api_key=TENANT_KEY, max_retries=0)


def _mirrors(gw: GatewayServer, outcome: str) -> float:
    value = gw.state.metrics.registry.get_sample_value(
        "specroute_gateway_shadow_mirrors_total", {"outcome": outcome}
    )
    return value or 0.0


def _drain_until(
    gw: GatewayServer, spec: int, base: int, timeout_s: float = 60.0
) -> list[TelemetryWindow]:
    windows: list[TelemetryWindow] = []
    deadline = time.monotonic() + timeout_s
    while True:
        windows += [w for b in gw.state.aggregator.drain_all() for w in b.windows]
        by_arm = {a: sum(w.requests for w in windows if w.arm is a) for a in Arm}
        if by_arm[Arm.SPEC] >= spec and by_arm[Arm.BASELINE] >= base:
            return windows
        assert time.monotonic() < deadline, f"telemetry incomplete: {by_arm}"
        time.sleep(0.05)


def test_shadow_serves_callers_from_baseline_and_mirrors_to_spec(
    shadow_gateway: GatewayServer,
) -> None:
    gw = shadow_gateway
    client = _client(gw)
    usage_cost = 0.0
    weights = gw.state.store.snapshot.quota_weights  # type: ignore[union-attr]
    prompts = ["def add(a, b):", "def fib(n):", "class Stack:", "import os\n"]
    for i, prompt in enumerate(prompts):
        raw = client.chat.completions.with_raw_response.create(
            model="tiny",
            messages=[{"role": "user", "content": prompt}],
            max_tokens=16,
            temperature=0.0,
            extra_headers={"x-request-id": f"shadow-{i}"},
        )
        assert raw.headers["x-specroute-decision"] == SHADOW_HEADER
        completion = raw.parse()
        assert completion.choices[0].message.content
        assert completion.usage is not None
        usage_cost += weighted_cost(
            prompt_tokens=completion.usage.prompt_tokens,
            completion_tokens=completion.usage.completion_tokens,
            rejected_draft_tokens=0,
            weights=weights,
        )
    # A streamed call is served from baseline too; its mirror is not streamed.
    stream = client.chat.completions.with_raw_response.create(
        model="tiny",
        messages=[{"role": "user", "content": "def sort(xs):"}],
        max_tokens=16,
        temperature=0.0,
        stream=True,
        stream_options={"include_usage": True},
    )
    assert stream.headers["x-specroute-decision"] == SHADOW_HEADER
    chunks = list(stream.parse())
    usage = next(c.usage for c in chunks if c.usage is not None)
    usage_cost += weighted_cost(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        rejected_draft_tokens=0,
        weights=weights,
    )

    windows = _drain_until(gw, spec=5, base=5)
    spec = [w for w in windows if w.arm is Arm.SPEC]
    base = [w for w in windows if w.arm is Arm.BASELINE]
    # Both arms are the rollout's evidence: the callers' requests and their mirrors.
    assert {w.rollout_id for w in windows} == {ROLLOUT_ID}
    assert sum(w.requests for w in base) == 5 and sum(w.requests for w in spec) == 5
    assert sum(w.errors + w.cancellations for w in spec) == 0
    drafts = sum(w.drafts for w in spec)
    accepted = sum(w.accepted_tokens for w in spec)
    assert drafts > 0 and 0 < accepted <= sum(w.drafted_tokens for w in spec)
    assert sum(w.drafts for w in base) == 0
    assert sum(w.request_acceptance.requests for w in spec) == 5
    assert _mirrors(gw, "ok") == 5
    # The tenant is charged for its own five requests, not for the mirrors.
    tenant = gw.state.store.snapshot.tenants[0]  # type: ignore[union-attr]
    # (Admission books an estimate that settles to the usage once each request is done.)
    deadline = time.monotonic() + 10
    used = -1.0
    while used != pytest.approx(usage_cost):
        assert time.monotonic() < deadline, f"charged {used}, the callers used {usage_cost}"
        time.sleep(0.05)
        used = asyncio.run(gw.state.quota.admit(tenant)).used


def test_shadow_mirrors_are_cancelled_over_budget_and_capped(
    tmp_path_factory: pytest.TempPathFactory,
    vllm_spec_server: RunningServer,
    vllm_baseline_server: RunningServer,
) -> None:
    snapshot = _shadow_snapshot(vllm_spec_server, vllm_baseline_server)
    with run_gateway(tmp_path_factory.mktemp("gw-budget"), snapshot, shadow_budget_s=0.001) as gw:
        raw = _client(gw).chat.completions.with_raw_response.create(
            model="tiny", messages=[{"role": "user", "content": "def f():"}], max_tokens=64
        )
        assert raw.headers["x-specroute-decision"] == SHADOW_HEADER
        assert raw.parse().choices[0].message.content is not None
        windows = _drain_until(gw, spec=1, base=1)
        spec = [w for w in windows if w.arm is Arm.SPEC]
        assert sum(w.cancellations for w in spec) == 1
        assert _mirrors(gw, "cancelled") == 1
    with run_gateway(tmp_path_factory.mktemp("gw-cap"), snapshot, shadow_max_inflight=0) as gw:
        for _ in range(3):
            raw = _client(gw).chat.completions.with_raw_response.create(
                model="tiny", messages=[{"role": "user", "content": "x = "}], max_tokens=4
            )
            assert raw.headers["x-specroute-decision"] == SHADOW_HEADER
        windows = _drain_until(gw, spec=0, base=3)
        assert [w for w in windows if w.arm is Arm.SPEC] == []
        assert _mirrors(gw, "skipped") == 3 and _mirrors(gw, "ok") == 0


def test_shadow_samples_its_share_of_requests(
    tmp_path_factory: pytest.TempPathFactory,
    vllm_spec_server: RunningServer,
    vllm_baseline_server: RunningServer,
) -> None:
    from gateway.decision.cohort import in_spec_cohort

    snapshot = _shadow_snapshot(vllm_spec_server, vllm_baseline_server, percentage=50.0)
    ids = [f"sample-{i}" for i in range(8)]
    expected = sum(in_spec_cohort("salt-1", "acme", rid, 50.0) for rid in ids)
    assert 0 < expected < len(ids)
    with run_gateway(tmp_path_factory.mktemp("gw-share"), snapshot) as gw:
        for rid in ids:
            raw = _client(gw).chat.completions.with_raw_response.create(
                model="tiny",
                messages=[{"role": "user", "content": "y = "}],
                max_tokens=4,
                extra_headers={"x-request-id": rid},
            )
            assert raw.headers["x-specroute-decision"] == SHADOW_HEADER
        windows = _drain_until(gw, spec=expected, base=len(ids))
        assert sum(w.requests for w in windows if w.arm is Arm.SPEC) == expected
