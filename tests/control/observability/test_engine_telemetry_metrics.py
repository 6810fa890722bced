"""The engine telemetry a heartbeat carries (steps, decode time, KV blocks, energy) is
stored on the worker and exported on control's /metrics, per worker."""

from datetime import UTC, datetime
from typing import Any

from fastapi.testclient import TestClient

from tests.control.observability.scrape import scrape
from tests.fixtures.db import AgentHeaders


def _beat(
    client: TestClient, headers: AgentHeaders, worker: str, pool: dict[str, Any], **values: Any
) -> int:
    response = client.post(
        f"/internal/v1/workers/{worker}/heartbeat",
        headers=headers(pool["id"]),
        json={
            "pool_id": pool["id"],
            "endpoint_url": "http://127.0.0.1:1",
            "healthy": True,
            "sent_at": datetime.now(UTC).isoformat(),
            **values,
        },
    )
    return response.status_code


def test_engine_telemetry_is_exported_per_worker_with_the_energy_source(
    app_client: TestClient, agent_headers: AgentHeaders, seeded: dict[str, Any]
) -> None:
    spec_source = "absent: no powercap (/sys/class/powercap missing); no NVML"
    spec = {
        "engine_steps": 43,
        "decode_seconds": 1.25,
        "decode_requests": 2,
        "kv_blocks_total": 819,
        "kv_blocks_used": 12,
        "kv_block_size": 128,
        "energy_source": spec_source,
    }
    base = {
        "engine_steps": 9,
        "kv_blocks_total": 100,
        "kv_blocks_used": 0,
        "energy_joules": 1234.5,
        "energy_source": "rapl:intel-rapl:0",
    }
    code = _beat(
        app_client, agent_headers, "spec-0", seeded["spec_pool"], running=3, telemetry=spec
    )
    assert code == 200
    assert (
        _beat(app_client, agent_headers, "base-0", seeded["baseline_pool"], telemetry=base) == 200
    )
    assert _beat(app_client, agent_headers, "old-0", seeded["baseline_pool"]) == 200  # no telemetry

    pv = str(seeded["version"]["id"])
    got = {
        (name, labels): value
        for (name, labels), value in scrape(app_client).items()
        if name.startswith("specroute_control_worker_")
        and any(k in name for k in ("engine_steps", "decode", "kv_blocks", "running", "energy"))
    }
    sp = (("pair_version", pv), ("pool", seeded["spec_pool"]["name"]), ("worker", "spec-0"))
    bp = (("pair_version", "none"), ("pool", seeded["baseline_pool"]["name"]), ("worker", "base-0"))

    def labels(base: tuple[tuple[str, str], ...], **extra: str) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((*base, *extra.items())))

    assert got == {
        ("specroute_control_worker_engine_steps_total", sp): 43.0,
        ("specroute_control_worker_decode_seconds_total", sp): 1.25,
        ("specroute_control_worker_decode_requests_total", sp): 2.0,
        ("specroute_control_worker_kv_blocks", labels(sp, state="total")): 819.0,
        ("specroute_control_worker_kv_blocks", labels(sp, state="used")): 12.0,
        ("specroute_control_worker_running_sequences", sp): 3.0,
        (
            "specroute_control_worker_energy_source_info",
            labels(sp, source=spec_source),
        ): 1.0,
        ("specroute_control_worker_engine_steps_total", bp): 9.0,
        ("specroute_control_worker_kv_blocks", labels(bp, state="total")): 100.0,
        ("specroute_control_worker_kv_blocks", labels(bp, state="used")): 0.0,
        ("specroute_control_worker_running_sequences", bp): 0.0,
        ("specroute_control_worker_energy_joules_total", bp): 1234.5,
        (
            "specroute_control_worker_energy_source_info",
            labels(bp, source="rapl:intel-rapl:0"),
        ): 1.0,
    }


def test_bad_engine_telemetry_is_refused_at_the_door(
    app_client: TestClient, agent_headers: AgentHeaders, seeded: dict[str, Any]
) -> None:
    pool = seeded["spec_pool"]
    for bad in (
        {"kv_blocks_used": -1},
        {"decode_seconds": -1.0},
        {"energy_joules": -0.5},
        {"energy_source": ""},
        {"kv_block_size": 0},
    ):
        assert _beat(app_client, agent_headers, "spec-0", pool, telemetry=bad) == 422, bad
