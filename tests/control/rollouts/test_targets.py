"""Both arms of a rollout serve the same target, by digest and adapter set, not path."""

import shutil
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from specwire.artifacts import inspect_model
from tests.control.conftest import created, rollout_parts
from tests.fixtures.db import AgentHeaders


def _setup(
    client: TestClient, headers: dict[str, str], dirs: dict[str, str], baseline_target: str
) -> dict[str, Any]:
    parts = rollout_parts(client, headers, dirs, baseline_target=baseline_target)
    return {
        "version": parts["version"],
        "spec": parts["spec_pool"],
        "base": parts["baseline_pool"],
        "body": parts["body"],
    }


def test_a_baseline_on_other_weights_is_refused_naming_both_digests(
    app_client: TestClient, admin_headers: dict[str, str], model_dirs: dict[str, str]
) -> None:
    setup = _setup(app_client, admin_headers, model_dirs, model_dirs["draft"])
    resp = app_client.post("/admin/v1/rollouts", json=setup["body"], headers=admin_headers)
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["code"] == "target_mismatch"
    details = error["details"]
    assert details["spec_target_digest"] == setup["version"]["target_digest"]
    assert details["baseline_target_digest"] == inspect_model(model_dirs["draft"]).weights_digest
    assert details["spec_target_digest"] != details["baseline_target_digest"]
    assert details["baseline_target_digest"][:12] in error["message"]


def test_a_copy_of_the_target_at_another_path_is_the_same_target(
    app_client: TestClient,
    admin_headers: dict[str, str],
    model_dirs: dict[str, str],
    tmp_path: Path,
) -> None:
    copy = shutil.copytree(model_dirs["target"], tmp_path / "target-copy")
    setup = _setup(app_client, admin_headers, model_dirs, str(copy))
    created(app_client.post("/admin/v1/rollouts", json=setup["body"], headers=admin_headers))


def test_adapter_sets_must_match_at_creation_and_after_a_pool_change(
    app_client: TestClient, admin_headers: dict[str, str], model_dirs: dict[str, str]
) -> None:
    setup = _setup(app_client, admin_headers, model_dirs, model_dirs["target"])
    base_id = setup["base"]["id"]
    adapter = Path(model_dirs["target"]).parent / "adapters" / "sql"
    with_lora = {"engine_args": {"lora-modules": [f"tiny-sql={adapter}"]}}
    any_version = {**admin_headers, "If-Match": "*"}
    assert (
        app_client.patch(f"/admin/v1/pools/{base_id}", json=with_lora, headers=any_version)
    ).status_code == 200
    refused = app_client.post("/admin/v1/rollouts", json=setup["body"], headers=admin_headers)
    assert refused.status_code == 422
    assert refused.json()["error"]["details"]["baseline_adapters"] == ["tiny-sql"]
    assert refused.json()["error"]["details"]["spec_adapters"] == []
    # Same adapter set on both arms: accepted; then a change that splits them is refused.
    spec_id = setup["spec"]["id"]
    assert (
        app_client.patch(f"/admin/v1/pools/{spec_id}", json=with_lora, headers=any_version)
    ).status_code == 200
    created(app_client.post("/admin/v1/rollouts", json=setup["body"], headers=admin_headers))
    split = app_client.patch(
        f"/admin/v1/pools/{base_id}", json={"engine_args": {}}, headers=any_version
    )
    assert split.status_code == 422 and split.json()["error"]["code"] == "target_mismatch"
    pool = app_client.get(f"/admin/v1/pools/{base_id}", headers=admin_headers).json()
    assert pool["engine_args"] == with_lora["engine_args"]


def _beat(pool_id: int, **kw: Any) -> dict[str, Any]:
    return {
        "pool_id": pool_id,
        "endpoint_url": f"http://127.0.0.1:9/{pool_id}",
        "healthy": True,
        "sent_at": "2026-12-01T00:00:00Z",
    } | kw


def test_workers_report_digest_and_engine_and_mismatches_get_no_traffic(
    app_client: TestClient,
    admin_headers: dict[str, str],
    internal_headers: dict[str, str],
    agent_headers: AgentHeaders,
    seeded: dict[str, Any],
) -> None:
    digest = seeded["version"]["target_digest"]
    spec_id, base_id = seeded["spec_pool"]["id"], seeded["baseline_pool"]["id"]
    beats = {
        "spec-ok": _beat(spec_id, model_digest=digest, engine_version="0.32.0"),
        "spec-old-engine": _beat(spec_id, model_digest=digest, engine_version="0.31.2"),
        "base-ok": _beat(base_id, model_digest=digest),
        # The baseline pool is held to its rollout's target, too.
        "base-other-weights": _beat(base_id, model_digest="e" * 64),
        "base-unreported": _beat(base_id),
    }
    for worker_id, beat in beats.items():
        resp = app_client.post(
            f"/internal/v1/workers/{worker_id}/heartbeat",
            json=beat,
            headers=agent_headers(beat["pool_id"]),
        )
        assert resp.status_code == 200, resp.text
    snapshot = app_client.get("/internal/v1/snapshot", headers=internal_headers).json()
    excluded = {w["id"]: w["excluded"] for p in snapshot["pools"] for w in p["workers"]}
    assert excluded == {
        "spec-ok": None,
        # Another engine version: gateways keep the pair off it (engine_version_mismatch).
        "spec-old-engine": None,
        "base-ok": None,
        "base-other-weights": "model_digest_mismatch",
        "base-unreported": None,
    }
    versions = {w["id"]: w["engine_version"] for p in snapshot["pools"] for w in p["workers"]}
    assert versions["spec-old-engine"] == "0.31.2"
    too_long = app_client.post(
        "/internal/v1/workers/w/heartbeat",
        json=_beat(spec_id, model_digest="x" * 65),
        headers=agent_headers(spec_id),
    )
    assert too_long.status_code == 422
