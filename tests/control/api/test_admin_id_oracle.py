"""No admin id is an existence oracle for a token that may not use the route (issue #21).

A token that lacks what a route demands gets one 403 whatever the id: every admin
route with a path id (read from the app, so a new route is covered the day it lands)
x an existing and a missing id x each token scope that lacks the route's scope. And
where a route's check depends on more than its scope (minting an agent token needs
`internal:agent`; revoking a token needs the target's scopes), the refusal is decided
before the lookup, so it cannot tell an existing id from a missing one either."""

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from control.api.openapi import required_scopes
from tests.control.conftest import WAIVE_ALL, created, qualify_offline

MISSING_INT = 999_999
MISSING_REQUEST = "no-such-request"

# Path parameters that are not ids: the same value in the existing and the missing case.
FIXED = {"action": "pause"}


def _token(client: TestClient, admin: dict[str, str], name: str, scopes: list[str]) -> str:
    minted = created(
        client.post("/admin/v1/admin-tokens", json={"name": name, "scopes": scopes}, headers=admin)
    )
    return str(minted["token"])


def _existing_ids(
    client: TestClient, admin: dict[str, str], internal: dict[str, str], seeded: dict[str, Any]
) -> dict[str, Any]:
    """A real row behind every id parameter of the admin API, created through it."""
    offline = qualify_offline(client, admin, seeded)
    tenant = created(client.post("/admin/v1/tenants", json={"name": "oracle"}, headers=admin))
    key = created(client.post(f"/admin/v1/tenants/{tenant['id']}/keys", json={}, headers=admin))
    token = created(
        client.post(
            "/admin/v1/admin-tokens",
            json={"name": "target", "scopes": ["admin:read"]},
            headers=admin,
        )
    )
    rollout_id = seeded["rollout"]["id"]
    started = client.post(f"/admin/v1/rollouts/{rollout_id}/start", json=WAIVE_ALL, headers=admin)
    assert started.status_code == 200, started.text
    decisions = client.get(
        "/admin/v1/decisions", params={"rollout_id": rollout_id}, headers=admin
    ).json()["items"]
    record = {
        "request_id": "oracle-req",
        "received_at": datetime(2026, 11, 30, 12, tzinfo=UTC).isoformat(),
        "tenant_id": tenant["id"],
        "tenant": "oracle",
        "endpoint": "chat",
        "stream": False,
        "model": "tiny",
        "arm": "baseline",
        "reason": "no_rollout",
        "sampling": {"temperature": 0.0, "seed_present": False, "stop_count": 0},
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "e2e_ms": 12.0,
        "outcome": "ok",
        "http_status": 200,
    }
    stored = client.post(
        "/internal/v1/telemetry",
        json={
            "gateway_id": "gw-oracle",
            "window_start": record["received_at"],
            "windows": [],
            "requests": [record],
        },
        headers=internal,
    )
    assert stored.status_code == 200 and stored.json()["requests_stored"] == 1, stored.text
    return {
        "pair_id": seeded["pair"]["id"],
        "version_id": seeded["version"]["id"],
        "pool_id": seeded["spec_pool"]["id"],
        "segment_id": seeded["segment"]["id"],
        "threshold-sets": seeded["thresholds"]["id"],
        "eval-sets": offline["eval_set"]["id"],
        "evaluation_id": offline["evaluation"]["id"],
        "tenant_id": tenant["id"],
        "key_id": key["id"],
        "token_id": token["id"],
        "rollout_id": rollout_id,
        "decision_id": decisions[0]["id"],
        "request_id": "oracle-req",
    }


def _id_routes(app: FastAPI) -> list[tuple[str, str, str]]:
    """(method, path, scope) of every admin route with a path id."""
    routes = []
    for route in app.routes:
        if isinstance(route, APIRoute) and route.path.startswith("/admin/") and "{" in route.path:
            (scope,) = required_scopes(route)
            routes += [(method, route.path, scope) for method in sorted(route.methods)]
    return routes


def _fill(path: str, ids: dict[str, Any], missing: str | None) -> str:
    """`path` with real ids, except the parameter `missing` ("*": every id) missing."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in FIXED:
            return FIXED[name]
        # `set_id` names a threshold set or an eval set: the collection says which.
        key = path.split("/")[3] if name == "set_id" else name
        if missing in ("*", name):
            return MISSING_REQUEST if name == "request_id" else str(MISSING_INT)
        return str(ids[key])

    return re.sub(r"\{([a-z_]+)\}", value, path)


def _send(client: TestClient, method: str, url: str, token: str) -> Any:
    headers = {"Authorization": f"Bearer {token}", "If-Match": '"1"'}
    body: dict[str, Any] | None = None if method in ("GET", "DELETE") else {}
    return client.request(method, url, json=body, headers=headers)


def test_a_token_without_the_routes_scope_gets_one_403_whatever_the_id(
    app_client: TestClient,
    admin_headers: dict[str, str],
    internal_headers: dict[str, str],
    seeded: dict[str, Any],
) -> None:
    ids = _existing_ids(app_client, admin_headers, internal_headers, seeded)
    agent = created(
        app_client.post(
            f"/admin/v1/pools/{ids['pool_id']}/agent-tokens",
            json={"name": "oracle-agent", "allowed_endpoints": ["http://127.0.0.1:8000"]},
            headers=admin_headers,
        )
    )
    tokens = {
        "admin:read": _token(app_client, admin_headers, "reader", ["admin:read"]),
        "admin:write": _token(app_client, admin_headers, "writer", ["admin:write"]),
        "internal:gateway": _token(app_client, admin_headers, "gw", ["internal:gateway"]),
        "internal:agent": str(agent["token"]),
    }
    routes = _id_routes(app_client.app)  # type: ignore[arg-type]
    # Every family of admin id routes is here (a sanity check on the route reading).
    assert len(routes) >= 34 and {s for _, _, s in routes} == {"admin:read", "admin:write"}
    cells = 0
    for method, path, scope in routes:
        names = re.findall(r"\{([a-z_]+)\}", path)
        variants = [None, "*", *(n for n in names if n not in FIXED)]
        for holder, token in tokens.items():
            if holder == scope:
                continue
            answers = [_send(app_client, method, _fill(path, ids, v), token) for v in variants]
            for variant, answer in zip(variants, answers, strict=True):
                what = f"{method} {path} missing={variant} as {holder}"
                assert answer.status_code == 403, (what, answer.text)
                assert answer.json() == answers[0].json(), what
                cells += 1
            assert answers[0].json()["error"]["details"] == {"required_scope": scope}
    assert cells >= 34 * 3 * 2


@pytest.mark.parametrize("target", ["existing", "missing"])
def test_minting_an_agent_token_without_internal_agent_is_403_before_the_pool_lookup(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], target: str
) -> None:
    writer = {"Authorization": f"Bearer {_token(app_client, admin_headers, 'w', ['admin:write'])}"}
    pool_id = seeded["spec_pool"]["id"] if target == "existing" else MISSING_INT
    answer = app_client.post(
        f"/admin/v1/pools/{pool_id}/agent-tokens",
        json={"name": "a", "allowed_endpoints": ["http://127.0.0.1:8000"]},
        headers=writer,
    )
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"] == {
        "message": "admin:w cannot create a token with scopes it does not hold: internal:agent",
        "type": "permission_error",
        "code": "scope_escalation",
        "param": "scopes",
        "details": {"param": "scopes", "missing_scopes": ["internal:agent"]},
        "field_errors": None,
    }
    # The bootstrap token holds every scope: it learns what exists (and mints).
    ok = app_client.post(
        f"/admin/v1/pools/{pool_id}/agent-tokens",
        json={"name": "a", "allowed_endpoints": ["http://127.0.0.1:8000"]},
        headers=admin_headers,
    )
    assert ok.status_code == (201 if target == "existing" else 404), ok.text


def test_revoking_a_token_one_cannot_revoke_answers_as_for_a_missing_one(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    writer = {"Authorization": f"Bearer {_token(app_client, admin_headers, 'w', ['admin:write'])}"}
    stronger = created(
        app_client.post(
            "/admin/v1/admin-tokens",
            json={"name": "rw", "scopes": ["admin:read", "admin:write"]},
            headers=admin_headers,
        )
    )
    answers = [
        app_client.post(f"/admin/v1/admin-tokens/{token_id}/revoke", headers=writer)
        for token_id in (stronger["id"], MISSING_INT)
    ]
    assert [a.status_code for a in answers] == [403, 403], [a.text for a in answers]
    first, second = (a.json()["error"] for a in answers)
    assert first["code"] == second["code"] == "scope_escalation"
    assert (
        first["details"] == second["details"] == {"param": "scopes", "held_scopes": ["admin:write"]}
    )
    assert first["message"].replace(str(stronger["id"]), "N") == second["message"].replace(
        str(MISSING_INT), "N"
    )
    listed = app_client.get("/admin/v1/admin-tokens", params={"name": "rw"}, headers=admin_headers)
    assert listed.json()["items"][0]["revoked_at"] is None
    # A token it can revoke (one with only its own scope) it revokes; the bootstrap
    # token still gets a 404 for a missing id.
    weaker = created(
        app_client.post(
            "/admin/v1/admin-tokens",
            json={"name": "w-only", "scopes": ["admin:write"]},
            headers=writer,
        )
    )
    revoked = app_client.post(f"/admin/v1/admin-tokens/{weaker['id']}/revoke", headers=writer)
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    missing = app_client.post(f"/admin/v1/admin-tokens/{MISSING_INT}/revoke", headers=admin_headers)
    assert missing.status_code == 404
