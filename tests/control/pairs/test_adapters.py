"""A pair version built for a LoRA adapter: registration checks, the pool spec the
launcher reads, and the adapters each pool serves in the gateway's snapshot."""

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.control.conftest import created
from tests.fixtures.db import AgentHeaders


def _adapter_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text(json.dumps({"r": 8, "peft_type": "LORA"}))
    return path


def _register(client: TestClient, headers: dict[str, str], dirs: dict[str, str], **kw: Any) -> Any:
    client.post("/admin/v1/pairs", json={"name": "tiny-a"}, headers=headers)
    pairs = client.get("/admin/v1/pairs", headers=headers).json()["items"]
    pair_id = next(p["id"] for p in pairs if p["name"] == "tiny-a")
    body = {
        "method": "draft_model",
        "target_ref": dirs["target"],
        "draft_ref": dirs["draft"],
        "num_speculative_tokens": 3,
    }
    return client.post(f"/admin/v1/pairs/{pair_id}/versions", json=body | kw, headers=headers)


def test_adapter_registration_is_checked(
    app_client: TestClient,
    admin_headers: dict[str, str],
    model_dirs: dict[str, str],
    tmp_path: Path,
) -> None:
    no_id = _register(app_client, admin_headers, model_dirs, adapter_ref=str(tmp_path))
    assert no_id.status_code == 422 and no_id.json()["error"]["details"]["param"] == "adapter_id"
    not_lora = _register(
        app_client, admin_headers, model_dirs, adapter_id="tiny-sql", adapter_ref=str(tmp_path)
    )
    assert not_lora.status_code == 422
    assert not_lora.json()["error"]["details"]["param"] == "adapter_ref"
    outside = _register(
        app_client, admin_headers, model_dirs, adapter_id="tiny-sql", adapter_ref="/etc"
    )
    assert outside.status_code == 422
    bad_name = _register(app_client, admin_headers, model_dirs, adapter_id="a b")
    assert bad_name.status_code == 422


def test_adapter_reaches_pool_spec_and_snapshot(
    app_client: TestClient,
    admin_headers: dict[str, str],
    internal_headers: dict[str, str],
    agent_headers: AgentHeaders,
    model_dirs: dict[str, str],
    tmp_path: Path,
) -> None:
    lora = _adapter_dir(tmp_path / "lora-sql")
    version = created(
        _register(
            app_client, admin_headers, model_dirs, adapter_id="tiny-sql", adapter_ref=str(lora)
        )
    )
    assert (version["adapter_id"], version["adapter_ref"]) == ("tiny-sql", str(lora.resolve()))
    spec_pool = created(
        app_client.post(
            "/admin/v1/pools",
            json={
                "name": "sql-spec",
                "served_model_name": "tiny",
                "target_ref": model_dirs["target"],
                "pair_version_id": version["id"],
            },
            headers=admin_headers,
        )
    )
    base_pool = created(
        app_client.post(
            "/admin/v1/pools",
            json={
                "name": "sql-base",
                "served_model_name": "tiny",
                "target_ref": model_dirs["target"],
                "engine_args": {
                    "lora-modules": [f"tiny-sql={lora}", f"tiny-legal={lora.parent / 'legal'}"]
                },
            },
            headers=admin_headers,
        )
    )
    spec = app_client.get(
        f"/internal/v1/pools/{spec_pool['id']}/spec", headers=agent_headers(spec_pool["id"])
    )
    assert spec.status_code == 200
    assert spec.json()["pair_version"]["adapter_id"] == "tiny-sql"
    assert spec.json()["pair_version"]["adapter_ref"] == str(lora.resolve())
    snapshot = app_client.get("/internal/v1/snapshot", headers=internal_headers).json()
    adapters = {p["name"]: p["adapters"] for p in snapshot["pools"]}
    assert adapters == {"sql-spec": ["tiny-sql"], "sql-base": ["tiny-sql", "tiny-legal"]}
    assert base_pool["pair_version_id"] is None
