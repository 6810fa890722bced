"""Pool engine_args through the admin API: only the allow-list of
specwire.engine_args reaches a pool, refused flags are named in a 422, and
nothing is written (issue #21, item 1)."""

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.models import Pool
from specwire.engine_args import ALLOWED_ENGINE_ARGS, RESERVED_ENGINE_FLAGS
from tests.fixtures.vllm_flags import PATH_CLASS_OR_CODE_FLAGS, help_flags, hostile_value


def _pool_body(target: str, engine_args: dict[str, Any], name: str = "p") -> dict[str, Any]:
    return {
        "name": name,
        "served_model_name": "tiny",
        "target_ref": target,
        "engine_args": engine_args,
    }


def _pools(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Pool)) or 0


def test_the_issues_reproduction_is_refused_naming_the_flag(
    app_client: TestClient,
    admin_headers: dict[str, str],
    model_dirs: dict[str, str],
    session: Session,
) -> None:
    body = _pool_body(model_dirs["target"], {"trust-remote-code": True, "lora-modules": ["x=/etc"]})
    refused = app_client.post("/admin/v1/pools", json=body, headers=admin_headers)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["param"], error["details"]["flag"]) == (
        "engine_arg_not_allowed",
        "engine_args",
        "trust-remote-code",
    )
    assert "--trust-remote-code" in error["message"]
    assert _pools(session) == 0


def test_every_path_class_or_code_flag_and_every_reserved_flag_is_refused(
    app_client: TestClient,
    admin_headers: dict[str, str],
    model_dirs: dict[str, str],
    session: Session,
) -> None:
    """Each flag of vLLM 0.32's --help that takes a path, a class or code, and each flag
    the launcher owns, on create and on update."""
    pool = app_client.post(
        "/admin/v1/pools", json=_pool_body(model_dirs["target"], {}), headers=admin_headers
    )
    assert pool.status_code == 201, pool.text
    pool_id = pool.json()["id"]
    refused: dict[str, tuple[int, str, int, str]] = {}
    for flag in sorted(PATH_CLASS_OR_CODE_FLAGS | (RESERVED_ENGINE_FLAGS & help_flags())):
        args = {flag: hostile_value(flag)}
        created = app_client.post(
            "/admin/v1/pools",
            json=_pool_body(model_dirs["target"], args, name="q"),
            headers=admin_headers,
        )
        updated = app_client.patch(
            f"/admin/v1/pools/{pool_id}",
            json={"engine_args": args},
            headers={**admin_headers, "If-Match": "*"},
        )
        refused[flag] = (
            created.status_code,
            created.json()["error"]["details"].get("flag"),
            updated.status_code,
            updated.json()["error"]["details"].get("flag"),
        )
    assert {flag: seen for flag, seen in refused.items() if seen != (422, flag, 422, flag)} == {}
    assert _pools(session) == 1
    row = session.get(Pool, pool_id)
    assert row is not None and row.engine_args == {}


def test_codes_say_why(
    app_client: TestClient, admin_headers: dict[str, str], model_dirs: dict[str, str]
) -> None:
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "port": ({"port": 9000}, "engine_arg_reserved"),
        "api-key": ({"api_key": "x"}, "engine_arg_reserved"),
        "worker-extension-cls": ({"worker-extension-cls": "os.system"}, "engine_arg_not_allowed"),
        "max-model-len": ({"max-model-len": "512"}, "engine_arg_invalid"),
        "lora-modules": ({"lora-modules": ["x=/etc"]}, "engine_arg_outside_model_roots"),
    }
    for flag, (args, code) in cases.items():
        response = app_client.post(
            "/admin/v1/pools", json=_pool_body(model_dirs["target"], args), headers=admin_headers
        )
        assert response.status_code == 422, response.text
        assert (response.json()["error"]["code"], response.json()["error"]["details"]["flag"]) == (
            code,
            flag,
        )


def test_allowed_arguments_and_adapters_inside_the_model_roots_are_stored_as_given(
    app_client: TestClient,
    admin_headers: dict[str, str],
    model_dirs: dict[str, str],
    session: Session,
) -> None:
    adapter = str(Path(model_dirs["target"]).parent / "adapters" / "sql")
    args = {
        "max_model_len": 512,
        "enforce-eager": True,
        "dtype": "float32",
        "max-lora-rank": 8,
        "lora-modules": [f"sql={adapter}"],
    }
    assert set(map(lambda k: k.replace("_", "-"), args)) <= set(ALLOWED_ENGINE_ARGS)
    response = app_client.post(
        "/admin/v1/pools", json=_pool_body(model_dirs["target"], args), headers=admin_headers
    )
    assert response.status_code == 201, response.text
    assert response.json()["engine_args"] == args
    row = session.get(Pool, response.json()["id"])
    assert row is not None and row.engine_args == args


@pytest.mark.parametrize("flag", ["lora-modules", "tokenizer", "chat-template"])
def test_a_refused_update_leaves_the_pool_as_it_was(
    flag: str,
    app_client: TestClient,
    admin_headers: dict[str, str],
    model_dirs: dict[str, str],
    session: Session,
) -> None:
    pool = app_client.post(
        "/admin/v1/pools",
        json=_pool_body(model_dirs["target"], {"max-model-len": 512}),
        headers=admin_headers,
    )
    assert pool.status_code == 201
    response = app_client.patch(
        f"/admin/v1/pools/{pool.json()['id']}",
        json={"engine_args": {"max-model-len": 256, flag: hostile_value(flag)}},
        headers={**admin_headers, "If-Match": "*"},
    )
    assert response.status_code == 422
    row = session.get(Pool, pool.json()["id"])
    assert row is not None
    session.refresh(row)
    assert row.engine_args == {"max-model-len": 512}
