"""The whole stack under a real Prometheus: every dashboard and rule expression works.

Control (SQLite, real migrations) and the gateway run for real on loopback, in
front of the session's real vLLM servers, with real engine agents heartbeating.
Traffic comes through the `openai` client: both arms of a rollout (its depth ladder
switching twice), a quota refusal and an upstream failure, so every series the
dashboards read exists.
A real Prometheus (Debian's package) scrapes both /metrics endpoints and
evaluates dashboards/rules.yml; each expression must parse and return series.
The same traffic must also land in control's telemetry tables via the gateway's
flusher.
"""

import functools
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from control.app import create_app as create_control_app
from control.migrate import upgrade
from control.settings import ControlSettings
from dashboards.generate import build, expressions
from engine.agent.client import ControlClient
from engine.agent.heartbeat import HeartbeatAgent, WorkerProbe
from engine.pools.local import tiny_pair_dir
from gateway.app import create_app as create_gateway_app
from gateway.settings import GatewaySettings
from tests.fixtures.services import require_prometheus_tool
from tests.fixtures.vllm import RunningServer
from tests.gateway.server import free_port, serve_app

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "stack-admin"
INTERNAL = "stack-internal"


class Admin:
    def __init__(self, url: str) -> None:
        self.http = httpx.Client(
            base_url=url + "/admin/v1", headers={"Authorization": f"Bearer {ADMIN}"}
        )

    def post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.http.post(path, json=body)
        assert response.status_code in (200, 201), response.text
        doc: dict[str, Any] = response.json()
        return doc

    def set_depth_ladder(self, rollout_id: int, ladder: dict[str, Any]) -> dict[str, Any]:
        etag = self.http.get(f"/rollouts/{rollout_id}").headers["etag"]
        response = self.http.patch(
            f"/rollouts/{rollout_id}", json={"depth_ladder": ladder}, headers={"If-Match": etag}
        )
        assert response.status_code == 200, response.text
        doc: dict[str, Any] = response.json()
        return doc


def depth_ladder(deep_pool: dict[str, Any], own_pool: dict[str, Any], bound: float) -> Any:
    """k = 5 while the load is below `bound` (always, here), else the rollout's own k = 3.
    A new bound is a new ladder: the gateway starts it on the default rung again, and
    the next request switches back to k = 5."""
    return {"rungs": [{"pool_id": deep_pool["id"], "max_load": bound}, {"pool_id": own_pool["id"]}]}


def _pid_of(server: RunningServer) -> int | None:
    return server.process.pid


def seed(admin: Admin, spec: RunningServer, baseline: RunningServer) -> dict[str, Any]:
    pair_dir = tiny_pair_dir()
    pair = admin.post("/pairs", {"name": "tiny"})
    version = admin.post(
        f"/pairs/{pair['id']}/versions",
        {
            "method": "draft_model",
            "target_ref": str(pair_dir / "target"),
            "draft_ref": str(pair_dir / "draft"),
            "num_speculative_tokens": 3,
        },
    )
    spec_pool = admin.post(
        "/pools",
        {
            "name": "tiny-spec",
            "served_model_name": spec.model,
            "target_ref": str(pair_dir / "target"),
            "pair_version_id": version["id"],
        },
    )
    # The depth ladder's deeper rung: a sibling version with k = 5 on a pool whose worker
    # is the same speculating server (which runs k = 3: the ladder's choice is what the
    # metrics show, not what the engine does).
    deep_version = admin.post(
        f"/pairs/{pair['id']}/versions",
        {
            "method": "draft_model",
            "target_ref": str(pair_dir / "target"),
            "draft_ref": str(pair_dir / "draft"),
            "num_speculative_tokens": 5,
        },
    )
    deep_pool = admin.post(
        "/pools",
        {
            "name": "tiny-spec-k5",
            "served_model_name": spec.model,
            "target_ref": str(pair_dir / "target"),
            "pair_version_id": deep_version["id"],
        },
    )
    base_pool = admin.post(
        "/pools",
        {
            "name": "tiny-base",
            "served_model_name": baseline.model,
            "target_ref": str(pair_dir / "target"),
        },
    )
    # A pool whose only worker is gone: requests for its model fail upstream.
    broken_pool = admin.post(
        "/pools",
        {"name": "broken", "served_model_name": "broken", "target_ref": str(pair_dir / "target")},
    )
    segment = admin.post("/segments", {"name": "code", "selector": {"tasks": ["code"]}})
    thresholds = admin.post(
        "/threshold-sets",
        {
            "name": "stack",
            "min_acceptance_rate": 0.3,
            "min_mean_acceptance_length": 1.5,
            "min_speedup": 1.0,
            "max_kv_cache_usage": 0.9,
            "min_samples": 100,
            "stage_dwell_seconds": 600,
            "guard_dwell_seconds": 600,
            "probation_percentage": 2.0,
            "cooldown_seconds": 600,
            # Every T=0 canary request gets its paired output-contract check, so the
            # equal-share panel has series (at the 2 % default it had none in one CI run).
            "contract_pair_percentage": 100.0,
        },
    )
    rollout = admin.post(
        "/rollouts",
        {
            "name": "code-tiny",
            "segment_id": segment["id"],
            "pair_version_id": version["id"],
            "spec_pool_id": spec_pool["id"],
            "baseline_pool_id": base_pool["id"],
            "threshold_set_id": thresholds["id"],
            "stages": [50, 100],
        },
    )
    admin.post(
        f"/rollouts/{rollout['id']}/start",
        {"waive": ["offline_evaluation", "shadow"], "reason": "metrics test: canary"},
    )
    admin.set_depth_ladder(rollout["id"], depth_ladder(deep_pool, spec_pool, 1000.0))
    tenant = admin.post("/tenants", {"name": "apps"})
    key = admin.post(f"/tenants/{tenant['id']}/keys", {"name": "k"})["key"]
    stingy = admin.post("/tenants", {"name": "stingy", "weighted_tokens_per_minute": 1})
    stingy_key = admin.post(f"/tenants/{stingy['id']}/keys", {"name": "k"})["key"]
    # Each pool's engine agent is enrolled for that pool and loopback only.
    agent_tokens = {
        pool["id"]: admin.post(
            f"/pools/{pool['id']}/agent-tokens",
            {"name": f"agent-{pool['name']}", "allowed_endpoints": ["http://127.0.0.1"]},
        )["token"]
        for pool in (spec_pool, deep_pool, base_pool, broken_pool)
    }
    return {
        "spec_pool": spec_pool,
        "deep_pool": deep_pool,
        "base_pool": base_pool,
        "broken_pool": broken_pool,
        "rollout": rollout,
        "key": key,
        "stingy_key": stingy_key,
        "agent_tokens": agent_tokens,
    }


def start_agents(
    control_url: str, world: dict[str, Any], spec: RunningServer, baseline: RunningServer
) -> list[HeartbeatAgent]:
    agents = []
    for worker_id, pool, server in (
        ("spec-0", world["spec_pool"], spec),
        ("spec-k5-0", world["deep_pool"], spec),
        ("base-0", world["base_pool"], baseline),
    ):
        probe = WorkerProbe(
            pool_id=pool["id"],
            endpoint_url=server.base_url,
            speculative=server.speculative,
            pid=functools.partial(_pid_of, server),
        )
        client = ControlClient(control_url, world["agent_tokens"][pool["id"]])
        agent = HeartbeatAgent(worker_id, probe, client, interval=3.0)
        agent.start()
        agents.append(agent)
    # A worker registered once and then dead (refused port): the error path.
    ControlClient(control_url, world["agent_tokens"][world["broken_pool"]["id"]]).heartbeat(
        "broken-0",
        WorkerProbe(
            pool_id=world["broken_pool"]["id"],
            endpoint_url=f"http://127.0.0.1:{free_port()}",
            speculative=False,
        )
        .beat(httpx.Client())
        .model_copy(update={"healthy": True}),
    )
    return agents


def drive_traffic(gateway_url: str, world: dict[str, Any], model: str, round_: int) -> None:
    client = openai.OpenAI(base_url=gateway_url + "/v1", api_key=world["key"], max_retries=0)
    for user in range(12):
        stream = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": f"def add_{round_}_{user}(a, b):"}],
            max_tokens=12,
            temperature=0,
            stream=True,
            user=f"user-{user}",
            extra_headers={"x-specroute-task": "code"},
        )
        assert sum(1 for _ in stream) > 0
    # Sampled requests, paired too: the output contract's T > 0 outcomes.
    for user in range(10):
        answer = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": f"class Stack_{round_}_{user}:"}],
            max_tokens=12,
            temperature=1.0,
            user=f"user-{user}",
            extra_headers={"x-specroute-task": "code"},
        )
        assert answer.choices
    with pytest.raises(openai.APIStatusError) as broken:
        client.completions.create(model="broken", prompt="x", max_tokens=4)
    assert broken.value.status_code in (502, 503)
    # Refused before routing: the refusals panel's series.
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=model, messages=[], max_tokens=-1)
    stingy = openai.OpenAI(base_url=gateway_url + "/v1", api_key=world["stingy_key"], max_retries=0)
    if round_ == 0:  # the first request is admitted and spends the whole budget
        stingy.completions.create(model=model, prompt="import os", max_tokens=4)
    with pytest.raises(openai.RateLimitError):
        stingy.completions.create(model=model, prompt="import os", max_tokens=4)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    binary = require_prometheus_tool("prometheus")
    port = free_port()
    config = tmp_path / "prometheus.yml"
    proc: subprocess.Popen[bytes] | None = None

    def start(targets: dict[str, str]) -> str:
        nonlocal proc
        shutil.copy(ROOT / "dashboards/rules.yml", tmp_path / "rules.yml")
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": ["rules.yml"],
                    "scrape_configs": [
                        {"job_name": job, "static_configs": [{"targets": [hostport]}]}
                        for job, hostport in targets.items()
                    ],
                }
            )
        )
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=(tmp_path / "prometheus.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/-/ready", timeout=1).status_code == 200:
                    return url
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError((tmp_path / "prometheus.log").read_text()[-2000:])

    yield start, tmp_path  # type: ignore[misc]
    if proc is not None:
        proc.terminate()
        proc.wait(timeout=30)


def query(prom_url: str, expr: str) -> list[dict[str, Any]]:
    response = httpx.get(prom_url + "/api/v1/query", params={"query": expr}, timeout=10)
    body = response.json()
    assert response.status_code == 200 and body["status"] == "success", (expr, body)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def rule_expressions() -> tuple[list[str], list[str]]:
    doc = yaml.safe_load((ROOT / "dashboards/rules.yml").read_text())
    records: list[str] = []
    alerts: list[str] = []
    for group in doc["groups"]:
        for rule in group["rules"]:
            (records if "record" in rule else alerts).append(rule["expr"])
    return records, alerts


def test_dashboards_and_rules_return_series_from_the_running_stack(
    tmp_path: Path,
    prometheus: Any,
    vllm_spec_server: RunningServer,
    vllm_baseline_server: RunningServer,
) -> None:
    start_prometheus, _ = prometheus
    db_url = f"sqlite:///{tmp_path / 'control.db'}"
    upgrade(db_url)
    control_settings = ControlSettings(
        data_dir=tmp_path, database_url=db_url, admin_token=ADMIN, internal_token=INTERNAL
    )
    with serve_app(create_control_app(control_settings)) as control_url:
        world = seed(Admin(control_url), vllm_spec_server, vllm_baseline_server)
        agents = start_agents(control_url, world, vllm_spec_server, vllm_baseline_server)
        gateway_settings = GatewaySettings(
            control_url=control_url,
            internal_token=INTERNAL,
            gateway_id="stack-gw",
            snapshot_poll_s=0.5,
            telemetry_window_s=2,
            telemetry_flush_s=0.5,
        )
        try:
            with serve_app(create_gateway_app(gateway_settings)) as gateway_url:
                prom_url = start_prometheus(
                    {
                        "gateway": gateway_url.removeprefix("http://"),
                        "control": control_url.removeprefix("http://"),
                    }
                )
                # Both pools healthy in the gateway's snapshot before traffic.
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    ready = httpx.get(gateway_url + "/readyz")
                    if ready.status_code == 200:
                        break
                    time.sleep(0.5)
                time.sleep(3)
                drive_traffic(gateway_url, world, vllm_spec_server.model, 0)
                # A second switch to k = 5, once the counter's series exists: a rate > 0.
                Admin(control_url).set_depth_ladder(
                    world["rollout"]["id"],
                    depth_ladder(world["deep_pool"], world["spec_pool"], 999.0),
                )
                time.sleep(3)
                drive_traffic(gateway_url, world, vllm_spec_server.model, 1)
                time.sleep(6)

                empty = []
                # The energy counter exists only where the host exposes one (RAPL, NVML);
                # elsewhere every worker's info series says why it is absent.
                sources = query(prom_url, "specroute_control_worker_energy_source_info")
                assert sources, "no energy source info series"
                no_energy = all(r["metric"]["source"].startswith("absent: ") for r in sources)
                for expr in expressions(build()):
                    if no_energy and "energy_joules" in expr:
                        assert not query(prom_url, expr)
                        continue
                    if not query(prom_url, expr):
                        empty.append(expr)
                records, alerts = rule_expressions()
                for expr in records:
                    if not query(prom_url, expr):
                        empty.append(expr)
                for expr in alerts:
                    query(prom_url, expr)  # parses and evaluates; firing is not expected
                assert not empty, "expressions without series:\n" + "\n".join(empty)

                rules = httpx.get(prom_url + "/api/v1/rules").json()["data"]["groups"]
                unhealthy = [
                    (r.get("name") or r.get("record"), r.get("lastError"))
                    for g in rules
                    for r in g["rules"]
                    if r["health"] != "ok"
                ]
                assert unhealthy == []
                shares = {
                    s["metric"]["arm"]: float(s["value"][1])
                    for s in query(
                        prom_url, 'segment_arm:specroute_request_share:rate5m{segment="code"}'
                    )
                }
                assert set(shares) == {"spec", "baseline"}
                assert sum(shares.values()) == pytest.approx(1.0, abs=1e-6)
                acceptance = query(prom_url, "segment:specroute_mean_acceptance_length:rate5m")
                assert all(1.0 <= float(s["value"][1]) <= 4.0 for s in acceptance)
                # The depth ladder: each ladder's first request switched to k = 5 for load,
                # once per ladder (two ladders), and the rung is k = 5 now.
                switches = query(prom_url, 'specroute_gateway_depth_switches_total{segment="code"}')
                assert [
                    (s["metric"]["k"], s["metric"]["reason"], s["value"][1]) for s in switches
                ] == [("5", "load", "2")]
                rate = query(
                    prom_url, 'segment_reason:specroute_depth_switches:rate5m{segment="code"}'
                )
                assert [s["metric"]["reason"] for s in rate] == ["load"]
                assert float(rate[0]["value"][1]) > 0
                rung = query(
                    prom_url, 'max by (segment) (specroute_gateway_depth_rung_k{segment="code"})'
                )
                assert [float(s["value"][1]) for s in rung] == [5.0]
        finally:
            for agent in agents:
                agent.stop()

        # The gateway's flusher delivered the same traffic to control's telemetry.
        from control.db import Database
        from control.models import TelemetryWindowRow

        database = Database(db_url)
        with database.session() as s:
            rows = s.query(TelemetryWindowRow).filter_by(source="stack-gw").all()
            by_arm: dict[str, int] = {}
            for row in rows:
                by_arm[row.arm] = by_arm.get(row.arm, 0) + row.requests
            drafted = sum(r.drafted_tokens for r in rows if r.arm == "spec")
        database.dispose()
        assert by_arm.get("spec", 0) > 0 and by_arm.get("baseline", 0) > 0, json.dumps(by_arm)
        assert drafted > 0
