"""A LoRA adapter end to end: the real openai client names the bundled `rot13` adapter
as its model, the gateway routes it on its segment and says so in the decision header,
real vLLM engines serve it with the adapter applied (the spec arm with the unadapted
draft speculating), and the gateway's own request records, ingested by a real control
plane, give the adapter its measured acceptance next to the base model's.
"""

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from fastapi.testclient import TestClient

from control.app import create_app
from control.migrate import upgrade
from control.settings import ControlSettings
from engine.pools.probe_prompts import CODE_PROMPTS
from engine.tiny.corpus import build_corpus
from engine.tiny.styles import styled_prompts
from specwire import (
    PolicySnapshot,
    RequestRecordDoc,
    SegmentSelector,
    SegmentSpec,
    TelemetryBatch,
    TenantSpec,
)
from tests.fixtures.vllm import TINY_ADAPTER, RunningServer
from tests.gateway.policy import (
    OVERRIDE_KEY,
    TENANT_KEY,
    key_hash,
    make_snapshot,
)
from tests.gateway.server import GatewayServer, run_gateway

pytestmark = pytest.mark.vllm

CIPHER_KEY = "sk-cipher-test-key"  # the adapter's tenant
ADAPTER_SEGMENT = 4
MAX_TOKENS = 32
ADMIN, INTERNAL = "adapters-admin", "adapters-internal"


def _snapshot(spec: RunningServer, baseline: RunningServer) -> PolicySnapshot:
    """Both pools serve the adapter. acme's segment runs a pair built for no adapter
    (so acme's adapter requests are a mismatch); the cipher tenant's segment selects
    the adapter and has its own rollout on the same pools, to measure its yield."""
    snap = make_snapshot(spec_urls=[spec.base_url], baseline_urls=[baseline.base_url])
    pools = [p.model_copy(update={"adapters": [TINY_ADAPTER]}) for p in snap.pools]
    segment = SegmentSpec(
        id=ADAPTER_SEGMENT,
        name="cipher-rot13",
        priority=20,
        selector=SegmentSelector(tenants=["cipher"], adapters=[TINY_ADAPTER]),
    )
    rollout = snap.rollouts[0].model_copy(update={"id": 12, "segment_id": ADAPTER_SEGMENT})
    tenant = TenantSpec(id=9, name="cipher", key_hashes=[key_hash(CIPHER_KEY)])
    return snap.model_copy(
        update={
            "pools": pools,
            "segments": [*snap.segments, segment],
            "rollouts": [*snap.rollouts, rollout],
            "tenants": [*snap.tenants, tenant],
        }
    )


@pytest.fixture(scope="module")
def servers(
    vllm_lora_servers: tuple[RunningServer, RunningServer],
) -> tuple[RunningServer, RunningServer]:
    return vllm_lora_servers


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, servers: tuple[RunningServer, RunningServer]
) -> Iterator[GatewayServer]:
    with run_gateway(tmp_path_factory.mktemp("gw-lora"), _snapshot(*servers)) as gw:
        yield gw


@pytest.fixture(scope="module")
def prompts() -> list[str]:
    """The adapter's tenant's traffic: held-out code in its style."""
    return styled_prompts(build_corpus(), "code", 4, "rot13")


def _complete(
    gw: GatewayServer, key: str, model: str, prompt: str, headers: dict[str, str] | None = None
) -> tuple[str, str]:
    client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)
    raw = client.completions.with_raw_response.create(
        model=model,
        prompt=prompt,
        max_tokens=MAX_TOKENS,
        temperature=0.0,
        extra_body={"ignore_eos": True},
        extra_headers=headers or {},
    )
    text = raw.parse().choices[0].text
    return raw.headers["x-specroute-decision"], text


def _engine_text(server: RunningServer, model: str, prompt: str) -> str:
    resp = httpx.post(
        server.base_url + "/v1/completions",
        json={
            "model": model,
            "prompt": prompt,
            "max_tokens": MAX_TOKENS,
            "temperature": 0.0,
            "ignore_eos": True,
        },
        timeout=120,
    )
    assert resp.status_code == 200, resp.text
    return str(resp.json()["choices"][0]["text"])


def _drain_records(gw: GatewayServer, n: int, timeout_s: float = 10.0) -> list[RequestRecordDoc]:
    """The gateway's request records, once `n` have been accounted."""
    records: list[RequestRecordDoc] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < n:
        assert time.monotonic() < deadline, f"{len(records)} of {n} records"
        records += [r for b in gw.state.aggregator.drain_all() for r in b.requests]
        time.sleep(0.05)
    return records


def test_a_mismatched_adapter_is_served_with_the_adapter_on_the_baseline_arm(
    gateway: GatewayServer, servers: tuple[RunningServer, RunningServer], prompts: list[str]
) -> None:
    _, baseline = servers
    header, text = _complete(gateway, TENANT_KEY, TINY_ADAPTER, prompts[0])
    assert header == f"arm=baseline; adapter={TINY_ADAPTER}; reason=adapter_mismatch"
    # The engine applied the adapter: its text, not the base model's.
    assert text == _engine_text(baseline, TINY_ADAPTER, prompts[0])
    assert text != _engine_text(baseline, "tiny", prompts[0])


def test_the_adapters_own_segment_speculates_losslessly_and_measures_its_collapse(
    tmp_path: Path, gateway: GatewayServer, prompts: list[str]
) -> None:
    gateway.state.aggregator.drain_all()  # only this test's records below
    for prompt in prompts:
        header, spec_text = _complete(gateway, CIPHER_KEY, TINY_ADAPTER, prompt)
        assert header == (
            f"arm=spec; pair=tiny-v3; k=3; adapter={TINY_ADAPTER}; reason=rollout_full"
        )
        # Lossless with the adapter: the baseline arm (acme's mismatch) says the same.
        base_header, base_text = _complete(gateway, TENANT_KEY, TINY_ADAPTER, prompt)
        assert base_header.startswith("arm=baseline") and base_text == spec_text
        # The same prompt without the adapter, forced onto the spec arm: the draft's
        # acceptance against the unadapted target, for comparison.
        forced, _ = _complete(
            gateway, OVERRIDE_KEY, "tiny", prompt, {"x-specroute-speculation": "on"}
        )
        assert forced.startswith("arm=spec")
    records = _drain_records(gateway, 3 * len(prompts))
    adapter_spec = [r for r in records if r.adapter == TINY_ADAPTER and r.arm == "spec"]
    assert len(adapter_spec) == len(prompts)
    assert all(r.segment_id == ADAPTER_SEGMENT and r.drafts > 0 for r in adapter_spec)
    assert {r.reason for r in records if r.adapter and r.arm == "baseline"} == {"adapter_mismatch"}

    # The gateway's batch into a real control plane, then the per-adapter readout.
    db_url = f"sqlite:///{tmp_path / 'control.db'}"
    upgrade(db_url)
    settings = ControlSettings(
        data_dir=tmp_path, database_url=db_url, admin_token=ADMIN, internal_token=INTERNAL
    )
    with TestClient(create_app(settings)) as control:
        batch = TelemetryBatch(
            gateway_id="gw-lora",
            window_start=min(r.received_at for r in records),
            windows=[],
            requests=records,
        )
        posted = control.post(
            "/internal/v1/telemetry",
            content=batch.model_dump_json(),
            headers={"Authorization": f"Bearer {INTERNAL}", "Content-Type": "application/json"},
        )
        assert posted.status_code == 200, posted.text
        since = min(r.received_at for r in records).isoformat()
        readout = control.get(
            "/admin/v1/adapters/acceptance",
            params={"since": since},
            headers={"Authorization": f"Bearer {ADMIN}"},
        )
    assert readout.status_code == 200, readout.text
    rows = {row["adapter"]: row for row in readout.json()["items"]}
    base, adapter = rows[None], rows[TINY_ADAPTER]
    assert (adapter["requests"], adapter["spec_requests"]) == (2 * len(prompts), len(prompts))
    assert base["spec_requests"] == len(prompts)
    # Measured on the real engine: the unadapted draft keeps up with the unadapted
    # target on this traffic but collapses against the adapted one.
    assert base["mean_acceptance_length"] > 2.0, base
    assert adapter["mean_acceptance_length"] < 1.6, adapter


def test_base_model_requests_batched_with_adapter_requests_keep_the_base_models_output(
    servers: tuple[RunningServer, RunningServer],
) -> None:
    """vLLM 0.32's CPU LoRA ops gave rows without an adapter the last adapter slot's
    delta (index -1), so a base-model request batched with rot13 requests got rot13's
    output. With the engine's fix (engine/vllm_fix/lora_rows.py) both arms give every
    base-model request, run concurrently with adapter requests, its greedy text alone."""

    prompts = list(CODE_PROMPTS[:6])
    cipher = styled_prompts(build_corpus(), "code", 6, "rot13")

    async def complete(url: str, model: str, prompt: str) -> str:
        async with httpx.AsyncClient(timeout=120) as http:
            body = {"model": model, "prompt": prompt, "max_tokens": 24, "temperature": 0.0}
            response = await http.post(f"{url}/v1/completions", json=body)
        response.raise_for_status()
        return str(response.json()["choices"][0]["text"])

    async def mixed(url: str, model: str) -> list[str]:
        out = await asyncio.gather(
            *(complete(url, model, p) for p in prompts),
            *(complete(url, TINY_ADAPTER, p) for p in cipher),
        )
        return list(out[: len(prompts)])

    spec, baseline = servers
    model = spec.pool.served_model_name
    alone = [asyncio.run(complete(baseline.base_url, model, p)) for p in prompts]
    assert len(set(alone)) > 1  # the prompts give different texts: a real comparison
    for server in (spec, baseline):
        assert asyncio.run(mixed(server.base_url, model)) == alone, server.pool.name
