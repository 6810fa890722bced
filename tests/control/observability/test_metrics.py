"""GET /metrics on the control plane reflects the rows: rollouts, flips, workers."""

from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gateway.metrics import GatewayMetrics
from tests.control.conftest import WAIVE_ALL
from tests.control.observability.scrape import scrape
from tests.fixtures.db import AgentHeaders


def test_metrics_follow_rollout_flips_and_heartbeats(
    app_client: TestClient,
    admin_headers: dict[str, str],
    agent_headers: AgentHeaders,
    seeded: dict[str, Any],
) -> None:
    rollout = seeded["rollout"]
    before = scrape(app_client)
    draft_key = (
        "specroute_control_rollout_state",
        (("rollout", "code-tiny"), ("segment", "code"), ("state", "draft")),
    )
    assert before[draft_key] == 1.0
    assert (
        before[
            (
                "specroute_control_rollout_spec_percentage",
                (("rollout", "code-tiny"), ("segment", "code")),
            )
        ]
        == 0.0
    )

    started = app_client.post(
        f"/admin/v1/rollouts/{rollout['id']}/start", headers=admin_headers, json=WAIVE_ALL
    )
    assert started.status_code == 200, started.text
    beat = app_client.post(
        "/internal/v1/workers/spec-0/heartbeat",
        headers=agent_headers(seeded["spec_pool"]["id"]),
        json={
            "pool_id": seeded["spec_pool"]["id"],
            "endpoint_url": "http://127.0.0.1:1",
            "healthy": True,
            "draft_loaded": True,
            "kv_cache_usage": 0.42,
            "running": 3,
            "waiting": 2,
            "sent_at": datetime.now(UTC).isoformat(),
        },
    )
    assert beat.status_code == 200, beat.text

    after = scrape(app_client)
    canary = (
        "specroute_control_rollout_state",
        (("rollout", "code-tiny"), ("segment", "code"), ("state", "canary")),
    )
    assert after[canary] == 1.0
    assert after[draft_key] == 0.0
    assert (
        after[
            (
                "specroute_control_rollout_spec_percentage",
                (("rollout", "code-tiny"), ("segment", "code")),
            )
        ]
        == 1.0
    )
    flips = {k: v for k, v in after.items() if k[0] == "specroute_control_decisions_total"}
    assert sum(flips.values()) == 1.0
    assert (
        after[
            (
                "specroute_control_pool_workers",
                (("health", "healthy"), ("kind", "spec"), ("pool", "tiny-spec")),
            )
        ]
        == 1.0
    )
    assert (
        after[
            (
                "specroute_control_pool_workers",
                (("health", "healthy"), ("kind", "baseline"), ("pool", "tiny-base")),
            )
        ]
        == 0.0
    )
    assert (
        after[
            (
                "specroute_control_worker_kv_cache_usage",
                (("pool", "tiny-spec"), ("worker", "spec-0")),
            )
        ]
        == 0.42
    )
    # The exposing rollout's acceptance floor, from its threshold set (the guard's).
    floor_key = (
        "specroute_control_rollout_min_acceptance_rate",
        (("rollout", "code-tiny"), ("segment", "code")),
    )
    assert floor_key not in before and after[floor_key] == 0.3
    depth = {
        (dict(labels)["pool"], dict(labels)["state"]): value
        for (name, labels), value in after.items()
        if name == "specroute_control_pool_queue_depth"
    }
    assert depth == {
        ("tiny-spec", "running"): 3.0,
        ("tiny-spec", "waiting"): 2.0,
        ("tiny-base", "running"): 0.0,
        ("tiny-base", "waiting"): 0.0,
    }
    assert (
        after[("specroute_control_snapshot_version", ())]
        > before[("specroute_control_snapshot_version", ())]
    )


def test_latency_slo_targets_are_exported_per_segment_on_the_gateway_buckets(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    # A target that is no bucket edge cannot be measured by the burn-rate rules: 422.
    off_edge = app_client.post(
        "/admin/v1/segments",
        headers=admin_headers,
        json={"name": "chat", "selector": {}, "ttft_slo_p95_s": 0.4},
    )
    assert off_edge.status_code == 422
    assert "0.3981072 or 0.6309573" in off_edge.text
    chat = app_client.post(
        "/admin/v1/segments",
        headers=admin_headers,
        json={"name": "chat", "selector": {}, "ttft_slo_p95_s": 0.3981072},
    )
    assert chat.status_code == 201, chat.text
    assert (chat.json()["ttft_slo_p95_s"], chat.json()["tpot_slo_p95_s"]) == (0.3981072, 0.1)
    code = seeded["segment"]
    patched = app_client.patch(
        f"/admin/v1/segments/{code['id']}",
        headers={**admin_headers, "If-Match": f'"{code["version"]}"'},
        json={"tpot_slo_p95_s": 0.2511886},
    )
    assert patched.status_code == 200, patched.text

    slo = {
        (dict(labels)["segment"], dict(labels)["kind"]): (dict(labels)["le"], value)
        for (name, labels), value in scrape(app_client).items()
        if name == "specroute_control_segment_latency_slo_seconds"
    }
    assert slo == {
        ("code", "ttft"): ("1.0", 1.0),
        ("code", "tpot"): ("0.2511886", 0.2511886),
        ("chat", "ttft"): ("0.3981072", 0.3981072),
        ("chat", "tpot"): ("0.1", 0.1),
        # The gateway's labels for unmatched traffic and for segments beyond its top K.
        ("none", "ttft"): ("1.0", 1.0),
        ("none", "tpot"): ("0.1", 0.1),
        ("other", "ttft"): ("1.0", 1.0),
        ("other", "tpot"): ("0.1", 0.1),
    }
    # Each le names a bucket the gateway really exposes, spelled the same way, so the
    # rules' `and on (segment, le)` selects it.
    gateway = GatewayMetrics(top_k_segments=4)
    gateway.ttft.labels("chat", "spec").observe(0.3)
    gateway.tpot.labels("code", "spec").observe(0.2)
    exposed = {
        (s.name, s.labels["segment"], s.labels["le"]): s.value
        for family in text_string_to_metric_families(generate_latest(gateway.registry).decode())
        for s in family.samples
        if s.name.endswith("_bucket")
    }
    assert exposed[("specroute_gateway_ttft_seconds_bucket", "chat", "0.3981072")] == 1.0
    assert exposed[("specroute_gateway_tpot_seconds_bucket", "code", "0.2511886")] == 1.0


def test_engine_cost_counters_are_exported_per_worker_from_heartbeats(
    app_client: TestClient, agent_headers: AgentHeaders, seeded: dict[str, Any]
) -> None:
    def beat(worker: str, pool: dict[str, Any], **values: Any) -> None:
        response = app_client.post(
            f"/internal/v1/workers/{worker}/heartbeat",
            headers=agent_headers(pool["id"]),
            json={
                "pool_id": pool["id"],
                "endpoint_url": "http://127.0.0.1:1",
                "healthy": True,
                "sent_at": datetime.now(UTC).isoformat(),
                **values,
            },
        )
        assert response.status_code == 200, response.text

    spec_counters = {"num_drafts": 10, "num_draft_tokens": 30, "num_accepted_tokens": 17}
    beat(
        "spec-0",
        seeded["spec_pool"],
        draft_loaded=True,
        spec=spec_counters,
        cpu_seconds=12.5,
        generation_tokens=40,
    )
    beat("base-0", seeded["baseline_pool"], cpu_seconds=3.25, generation_tokens=9)
    beat("blind-0", seeded["baseline_pool"])  # an agent without the server's pid: no CPU figure
    # A negative or non-finite counter is refused at the door.
    bad = app_client.post(
        "/internal/v1/workers/spec-0/heartbeat",
        headers=agent_headers(seeded["spec_pool"]["id"]),
        json={
            "pool_id": seeded["spec_pool"]["id"],
            "endpoint_url": "http://127.0.0.1:1",
            "healthy": True,
            "sent_at": datetime.now(UTC).isoformat(),
            "cpu_seconds": -1,
        },
    )
    assert bad.status_code == 422

    pv = str(seeded["version"]["id"])
    cost = {
        (name, dict(labels)["worker"], dict(labels)["pair_version"]): value
        for (name, labels), value in scrape(app_client).items()
        if name.startswith("specroute_control_worker_") and "kv_cache" not in name
    }
    assert cost == {
        ("specroute_control_worker_cpu_seconds_total", "spec-0", pv): 12.5,
        ("specroute_control_worker_accepted_tokens_total", "spec-0", pv): 17.0,
        ("specroute_control_worker_generation_tokens_total", "spec-0", pv): 40.0,
        ("specroute_control_worker_cpu_seconds_total", "base-0", "none"): 3.25,
        ("specroute_control_worker_generation_tokens_total", "base-0", "none"): 9.0,
    }
