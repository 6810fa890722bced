"""Evidence forms in a fleet: two spec workers behind the gateway's own balancer.

Issue #20: the gateway's least-outstanding balancer keeps a pool's workers at
nearly the same load, so the arms' loads at dispatch rarely share a bucket; the
automation compares each arm along its own line over load, read at the load the
next stage brings (`control/stats/load_model.py`). Here on real parts:

- control (uvicorn, SQLite file), a spec pool of two real vLLM workers of the
  bundled tiny pair (the session's spec server and a test-owned one) and a
  baseline pool of one (the session's baseline server), each with its engine
  agent heartbeating;
- a rollout in canary at 50 % (offline and shadow waived), a real gateway
  polling control and routing through its own `gateway.routing.balancer`;
- 8 concurrent streams from the real `openai` client for about 40 s, each
  request under its own user (its own cohort), so both arms carry load > 0;
- the gateway's telemetry windows flushed to control.

Then the readout (`GET /admin/v1/rollouts/{id}/evidence`, the automation's own
`gather_evidence` as a dry run) must hold a stage comparison at the next
stage's projected load, with requests in both arms and a proper interval, and
the request records must show the spec arm's requests spread over both spec
workers. No Celery worker runs: the test reads the evidence, nothing acts on it.
"""

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from sqlalchemy import select

from control.db import Database
from control.models import TelemetryWindowRow
from engine.pools.local import tiny_spec_pool
from engine.pools.probe_prompts import CODE_PROMPTS
from specwire.admin_client import AdminClient
from tests.e2e.stack import engine_agents, wait_routable
from tests.fixtures.vllm import (
    STARTUP_TIMEOUT_S,
    RunningServer,
    launch_tiny_server,
    require_tiny_pair,
)
from tests.gateway.server import GatewayServer, run_control_gateway, serve_control

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ADMIN = "fleet-admin-token"
INTERNAL = "fleet-internal-token"
STREAMS = 8
TRAFFIC_S = 40.0
MAX_TOKENS = 24
# NOTE: the projection takes the segment's rate as fixed (open loop) while this test's
# streams are a closed loop, and on a loaded 2-core box the spec line is steep: from 50 %
# to full (90 %) it sat near divergence (a busy CI run projected the ceiling, 1000). A
# step to 60 % keeps the projected load inside what the lines may be read at.
STAGES = [50.0, 60.0, 100.0]
THRESHOLDS: dict[str, Any] = {
    "min_acceptance_rate": 0.1,
    "acceptance_indifference": 0.1,
    "min_mean_acceptance_length": 1.2,
    "min_speedup": 1.0,
    "max_kv_cache_usage": 0.95,
    "min_samples": 8,
    "min_block_requests": 4,
    "stage_dwell_seconds": 0,
    "guard_dwell_seconds": 0,
    "probation_percentage": 10.0,
    "cooldown_seconds": 3600,
    "latency_margin": 3.0,
    "ttft_margin": 10.0,
}


@pytest.fixture(scope="module")
def fleet_servers(
    request: pytest.FixtureRequest, vllm_log_dir: Path
) -> Iterator[dict[str, RunningServer]]:
    """The session's spec and baseline servers plus a second, test-owned spec server,
    launched before the session's are awaited so the start-ups overlap."""
    extra = launch_tiny_server(tiny_spec_pool(require_tiny_pair()), vllm_log_dir, core_index=1)
    try:
        spec: RunningServer = request.getfixturevalue("vllm_spec_server")
        baseline: RunningServer = request.getfixturevalue("vllm_baseline_server")
        extra.server.wait_ready(STARTUP_TIMEOUT_S)
        yield {"spec-a": spec, "spec-b": extra, "baseline": baseline}
    finally:
        extra.stop()


def _register(admin: AdminClient) -> dict[str, Any]:
    pair_dir = require_tiny_pair()
    pair = admin.call("POST", "/pairs", json={"name": "tiny"})
    version = admin.call(
        "POST",
        f"/pairs/{pair['id']}/versions",
        json={
            "method": "draft_model",
            "target_ref": str(pair_dir / "target"),
            "draft_ref": str(pair_dir / "draft"),
            "num_speculative_tokens": 3,
            "draft_sample_method": "probabilistic",
        },
    )
    pools = {
        name: admin.call(
            "POST",
            "/pools",
            json={
                "name": f"fleet-{name}",
                "served_model_name": "tiny",
                "target_ref": str(pair_dir / "target"),
                "desired_workers": workers,
                **({"pair_version_id": version["id"]} if name == "spec" else {}),
            },
        )["id"]
        for name, workers in (("spec", 2), ("baseline", 1))
    }
    thresholds = admin.call("POST", "/threshold-sets", json={"name": "fleet", **THRESHOLDS})
    segment = admin.call(
        "POST",
        "/segments",
        json={"name": "code-completion", "selector": {"tasks": ["code"]}, "priority": 0},
    )
    tenant = admin.call("POST", "/tenants", json={"name": "acme"})
    key = admin.call("POST", f"/tenants/{tenant['id']}/keys", json={"name": "fleet"})["key"]
    rollout = admin.call(
        "POST",
        "/rollouts",
        json={
            "name": "code-tiny",
            "segment_id": segment["id"],
            "pair_version_id": version["id"],
            "spec_pool_id": pools["spec"],
            "baseline_pool_id": pools["baseline"],
            "threshold_set_id": thresholds["id"],
            "stages": STAGES,
        },
    )
    return {"pools": pools, "rollout_id": rollout["id"], "key": key}


def _wait_canary(gw: GatewayServer, rollout_id: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        snap = gw.state.store.snapshot
        rollout = next((r for r in snap.rollouts if r.id == rollout_id), None) if snap else None
        if rollout is not None and rollout.state.value == "canary":
            return
        time.sleep(0.05)
    raise AssertionError(f"the gateway never saw rollout {rollout_id} in canary")


def _drive(gw: GatewayServer, key: str) -> dict[str, Counter[str]]:
    """STREAMS threads, each streaming one request after another for TRAFFIC_S seconds;
    returns the requests and completion tokens each arm served (from the decision header
    and each stream's usage chunk)."""
    served: dict[str, Counter[str]] = {"requests": Counter(), "tokens": Counter()}
    failures: list[BaseException] = []
    lock = threading.Lock()
    deadline = time.monotonic() + TRAFFIC_S

    def stream(index: int) -> None:
        client = openai.OpenAI(base_url=gw.base_url + "/v1", api_key=key, max_retries=0)
        sent = 0
        try:
            while time.monotonic() < deadline:
                request_id = f"fleet-{index}-{sent}"
                prompt = CODE_PROMPTS[(index + sent) % len(CODE_PROMPTS)]
                raw = client.chat.completions.with_raw_response.create(
                    model="tiny",
                    messages=[{"role": "user", "content": prompt}],
                    max_tokens=MAX_TOKENS,
                    temperature=0.0,
                    stream=True,
                    stream_options={"include_usage": True},
                    user=request_id,
                    extra_headers={"x-request-id": request_id, "x-specroute-task": "code"},
                )
                arm = raw.headers["x-specroute-decision"].split(";")[0].removeprefix("arm=")
                tokens = 0
                for chunk in raw.parse():
                    if chunk.usage is not None:
                        tokens = chunk.usage.completion_tokens
                assert tokens > 0, request_id
                with lock:
                    served["requests"][arm] += 1
                    served["tokens"][arm] += tokens
                sent += 1
        except BaseException as exc:  # surfaced in the test's thread below
            failures.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(STREAMS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=TRAFFIC_S + 120.0)
    assert not failures, failures
    return served


def _windows(database: Database, rollout_id: int) -> list[TelemetryWindowRow]:
    with database.session() as s:
        rows = list(
            s.scalars(select(TelemetryWindowRow).where(TelemetryWindowRow.rollout_id == rollout_id))
        )
        s.expunge_all()
        return rows


def _wait_windows(
    database: Database, rollout_id: int, requests: Counter[str], timeout_s: float = 30.0
) -> list[TelemetryWindowRow]:
    """Until control holds every request each arm served."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = _windows(database, rollout_id)
        counts = {a: sum(r.requests for r in rows if r.arm == a) for a in ("spec", "baseline")}
        if all(counts[a] >= requests[a] for a in counts):
            return rows
        assert time.monotonic() < deadline, f"telemetry in control: {counts} of {requests}"
        time.sleep(0.2)


def _spec_records(control_url: str, expected: int, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """Every request record of the spec arm (paged), once control holds `expected`."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=control_url, headers={"Authorization": f"Bearer {ADMIN}"}) as http:
        while True:
            items: list[dict[str, Any]] = []
            cursor: str | None = None
            while True:
                params: dict[str, Any] = {"tenant": "acme", "arm": "spec", "limit": 200}
                if cursor is not None:
                    params["cursor"] = cursor
                page = http.get("/admin/v1/requests", params=params)
                assert page.status_code == 200, page.text
                items += page.json()["items"]
                cursor = page.json()["next_cursor"]
                if cursor is None:
                    break
            if len(items) >= expected:
                return items
            assert time.monotonic() < deadline, f"{len(items)} of {expected} spec records"
            time.sleep(0.2)


def test_fleet_evidence_forms_at_the_next_stage_load_with_two_spec_workers(
    tmp_path: Path, fleet_servers: dict[str, RunningServer]
) -> None:
    started = time.monotonic()
    with serve_control(tmp_path, ADMIN, INTERNAL) as control:
        admin = AdminClient(control.url, ADMIN)
        parts = _register(admin)
        rollout_id = parts["rollout_id"]
        pools = parts["pools"]
        agent_pools = {name: pools[name.split("-")[0]] for name in fleet_servers}
        with engine_agents(admin, control.url, agent_pools, fleet_servers, prefix="fleet"):
            canary = admin.call(
                "POST",
                f"/rollouts/{rollout_id}/start",
                json={"reason": "fleet evidence test", "waive": ["offline_evaluation", "shadow"]},
            )
            assert (canary["state"], canary["percentage"]) == ("canary", STAGES[0])
            with run_control_gateway(tmp_path / "gw", control.url, INTERNAL) as gw:
                wait_routable(gw)
                _wait_canary(gw, rollout_id)
                snap = gw.state.store.snapshot
                assert snap is not None
                [spec_pool] = [p for p in snap.pools if p.id == pools["spec"]]
                spec_workers = {w.id: w.endpoint_url for w in spec_pool.workers}
                assert sorted(spec_workers.values()) == sorted(
                    fleet_servers[n].base_url for n in ("spec-a", "spec-b")
                )
                served = _drive(gw, parts["key"])
                database = Database(control.db_url)
                rows = _wait_windows(database, rollout_id, served["requests"])
                database.dispose()
                records = _spec_records(control.url, served["requests"]["spec"])
                readout = admin.call("GET", f"/rollouts/{rollout_id}/evidence")
        admin.close()
    took = time.monotonic() - started

    # Both arms served, and control holds each arm's requests and tokens.
    requests, tokens = served["requests"], served["tokens"]
    assert set(requests) == {"spec", "baseline"}, requests
    assert min(requests.values()) >= 20, requests
    for arm in ("spec", "baseline"):
        mine = [r for r in rows if r.arm == arm]
        assert sum(r.requests for r in mine) == requests[arm]
        assert sum(r.completion_tokens for r in mine) == tokens[arm]
        assert sum(r.errors for r in mine) == 0
        # Every load slice carries its exact load sum, and the workers carried load.
        slices = [s for r in mine for s in r.histograms["by_load"]]
        assert slices and all(s["load_sum"] is not None for s in slices), arm
        assert sum(s["requests"] for s in slices) == requests[arm]
        assert sum(s["load_sum"] for s in slices) > 0, arm

    # The balancer spread the spec arm over both spec workers, each a fair share.
    per_worker = Counter(r["worker_id"] for r in records)
    assert set(per_worker) == set(spec_workers), per_worker
    assert sum(per_worker.values()) == requests["spec"]
    assert min(per_worker.values()) >= requests["spec"] // 4, per_worker

    evidence = readout["evidence"]
    assert readout["state"] == "canary" and evidence["missing"] == [], evidence["missing"]
    assert evidence["spec"]["mean_load"] > 0 and evidence["baseline"]["mean_load"] > 0
    # The next stage (60 %) projected for two spec workers, and
    # readable along both arms' lines at that load.
    nxt = evidence["next_stage"]
    assert (nxt["share_now"], nxt["share_next"], nxt["spec_workers"]) == (50.0, 60.0, 2)
    assert nxt["spec_load_next"] > nxt["spec_load_now"] > 0
    low, high = nxt["readable_loads"]
    assert low <= nxt["spec_load_next"] <= high, nxt
    assert nxt["advice"] is None, nxt["advice"]
    comparison = nxt["speedup"]
    assert comparison is not None, nxt
    assert comparison["metric"] == "e2e_per_token"
    assert comparison["at_load"] == pytest.approx(nxt["spec_load_next"])
    assert 0 < comparison["spec_requests"] <= requests["spec"]
    assert 0 < comparison["baseline_requests"] <= requests["baseline"]
    assert comparison["blocks"] >= 2
    # What the lines are for: with two spec workers against one baseline worker, the
    # balancer keeps the baseline's worker about twice as busy, yet the arms are read at
    # one load, the spec arm's projected one.
    assert 0 < comparison["spec_load"] < comparison["baseline_load"], comparison
    assert 0 < comparison["lower"] < comparison["speedup"] < comparison["upper"], comparison
    print(
        f"fleet evidence: {dict(requests)} requests, spec per worker {dict(per_worker)}, "
        f"spec load {nxt['spec_load_now']:.2f} -> {nxt['spec_load_next']:.2f} "
        f"(readable {low:.2f}..{high:.2f}; arms seen at {comparison['spec_load']:.2f} and "
        f"{comparison['baseline_load']:.2f}), speedup {comparison['speedup']:.3f} "
        f"[{comparison['lower']:.3f}, {comparison['upper']:.3f}], {took:.0f} s"
    )
