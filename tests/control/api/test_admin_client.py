"""The admin SDK against the real app: each call is an operation of control's
OpenAPI document, errors are typed with the API's code, and together the calls
cover the admin API."""

import re
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from specwire.admin_client import (
    AdminClient,
    AsyncAdminClient,
    NotFound,
    PreconditionFailed,
    Unreachable,
)
from tests.control.conftest import WAIVE_ALL, sdk_http
from tests.fixtures.db import ADMIN_TOKEN


def _operation_finder(doc: dict[str, Any]) -> list[tuple[str, re.Pattern[str], str]]:
    found = []
    for path, item in doc["paths"].items():
        pattern = re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "$")
        for method, operation in item.items():
            found.append((method.upper(), pattern, operation["operationId"]))
    # Literal segments first: /rollouts/1/evidence is getRolloutEvidence, not actOnRollout.
    found.sort(key=lambda f: f[1].pattern.count("[^/]+"))
    return found


@pytest.fixture
def recorded(app_client: TestClient) -> tuple[AdminClient, list[str]]:
    finder = _operation_finder(app_client.get("/openapi.json").json())
    seen: list[str] = []

    def record(request: httpx.Request) -> None:
        path = request.url.path
        ids = [op for method, rx, op in finder if method == request.method and rx.match(path)]
        assert ids, f"{request.method} {path} is no operation of the OpenAPI document"
        seen.append(ids[0])

    # NOTE: a TestClient runs the real app in-process (no socket).
    http = TestClient(
        app_client.app,
        base_url="http://testserver/admin/v1",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    http.event_hooks = {"request": [record], "response": []}
    admin = AdminClient("http://testserver", http=sdk_http(http))
    return admin, seen


def test_the_sdk_drives_the_admin_api_with_typed_errors(
    recorded: tuple[AdminClient, list[str]], seeded: dict[str, Any]
) -> None:
    admin, seen = recorded
    assert [p["name"] for p in admin.pools.list()] == ["tiny-spec", "tiny-base"]
    assert admin.pools.find("tiny-base")["id"] == seeded["baseline_pool"]["id"]
    updated = admin.pools.update("tiny-base", {"desired_workers": 2})
    assert (updated["desired_workers"], updated["version"]) == (2, 2)
    with pytest.raises(PreconditionFailed) as stale:
        admin.pools.update("tiny-base", {"desired_workers": 3}, if_match=1)
    assert (stale.value.status, stale.value.code) == (412, "stale_version")
    with pytest.raises(NotFound) as missing:
        admin.pairs.get(987654)
    assert missing.value.code == "pair_not_found"
    with pytest.raises(NotFound, match="no segment named 'nope'"):
        admin.segments.find("nope")

    tenant = admin.tenants.create({"name": "acme"})
    admin.tenants.update("acme", {"override_allowed": True})
    key = admin.tenants.create_key("acme", "ci")
    assert key["key"] and [k["id"] for k in admin.tenants.keys(tenant["id"])] == [key["id"]]
    assert admin.tenants.revoke_key("acme", key["id"])["revoked_at"] is not None
    admin.tenants.delete("acme")

    rollout = admin.rollouts.act(
        "code-tiny", "start", waive=WAIVE_ALL["waive"], reason=WAIVE_ALL["reason"]
    )
    assert rollout["state"] == "canary"
    assert admin.rollouts.evidence("code-tiny")
    assert [v["id"] for v in admin.pairs.versions("tiny")] == [seeded["version"]["id"]]
    assert admin.threshold_sets.latest("default")["version"] == 1
    token = admin.admin_tokens.create({"name": "viewer", "scopes": ["admin:read"]})
    assert admin.admin_tokens.revoke(token["id"])["revoked_at"] is not None
    assert list(admin.decisions.list(rollout_id=rollout["id"]))
    assert list(admin.audit.list(entity_type="tenant"))

    assert {
        "listPools",
        "getPool",
        "updatePool",
        "getPair",
        "createTenant",
        "updateTenant",
        "deleteTenant",
        "createApiKey",
        "listApiKeys",
        "revokeApiKey",
        "actOnRollout",
        "getRolloutEvidence",
        "listPairVersions",
        "listThresholdSets",
        "createAdminToken",
        "revokeAdminToken",
        "listDecisions",
        "listAuditEvents",
    } <= set(seen)


def test_an_unreachable_control_plane_is_one_typed_error() -> None:
    admin = AdminClient("http://127.0.0.1:9", "t", timeout_s=2.0)
    with pytest.raises(Unreachable, match="control plane unreachable at"):
        admin.pools.get(1)
    admin.close()


@pytest.fixture
def async_recorded(app_client: TestClient) -> tuple[AsyncAdminClient, list[str]]:
    finder = _operation_finder(app_client.get("/openapi.json").json())
    seen: list[str] = []

    async def record(request: httpx.Request) -> None:
        path = request.url.path
        ids = [op for method, rx, op in finder if method == request.method and rx.match(path)]
        assert ids, f"{request.method} {path} is no operation of the OpenAPI document"
        seen.append(ids[0])

    # NOTE: the real app in-process over ASGI (its lifespan already run by app_client).
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app_client.app),
        base_url="http://testserver/admin/v1",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        event_hooks={"request": [record]},
    )
    return AsyncAdminClient("http://testserver", http=http), seen


async def test_the_async_sdk_drives_the_same_api_with_the_same_errors(
    async_recorded: tuple[AsyncAdminClient, list[str]], seeded: dict[str, Any]
) -> None:
    admin, seen = async_recorded
    async with admin:
        assert [p["name"] async for p in admin.pools.list()] == ["tiny-spec", "tiny-base"]
        assert (await admin.pools.find("tiny-base"))["id"] == seeded["baseline_pool"]["id"]
        updated = await admin.pools.update("tiny-base", {"desired_workers": 2})
        assert (updated["desired_workers"], updated["version"]) == (2, 2)
        with pytest.raises(PreconditionFailed) as stale:
            await admin.pools.update("tiny-base", {"desired_workers": 3}, if_match=1)
        assert (stale.value.status, stale.value.code) == (412, "stale_version")
        with pytest.raises(NotFound) as missing:
            await admin.pairs.get(987654)
        assert missing.value.code == "pair_not_found"
        with pytest.raises(NotFound, match="no segment named 'nope'"):
            await admin.segments.find("nope")

        tenant = await admin.tenants.create({"name": "acme"})
        await admin.tenants.update("acme", {"override_allowed": True})
        key = await admin.tenants.create_key("acme", "ci")
        assert [k["id"] async for k in admin.tenants.keys(tenant["id"])] == [key["id"]]
        shown = await admin.tenants.key("acme", "ci")
        assert (shown["id"], shown["prefix"]) == (key["id"], key["key"][: len(shown["prefix"])])
        assert await admin.tenants.key("acme", key["id"]) == shown
        assert (await admin.tenants.revoke_key("acme", key["id"]))["revoked_at"] is not None
        assert await admin.tenants.delete("acme") == tenant["id"]

        rollout = await admin.rollouts.act(
            "code-tiny", "start", waive=WAIVE_ALL["waive"], reason=WAIVE_ALL["reason"]
        )
        assert rollout["state"] == "canary"
        assert await admin.rollouts.evidence("code-tiny")
        versions = [v["id"] async for v in admin.pairs.versions("tiny")]
        assert versions == [seeded["version"]["id"]]
        assert (await admin.threshold_sets.latest("default"))["version"] == 1
        token = await admin.admin_tokens.create({"name": "viewer", "scopes": ["admin:read"]})
        assert (await admin.admin_tokens.find("viewer"))["scopes"] == ["admin:read"]
        assert (await admin.admin_tokens.get(token["id"]))["name"] == "viewer"
        assert (await admin.admin_tokens.revoke(token["id"]))["revoked_at"] is not None
        assert [d["kind"] async for d in admin.decisions.list(rollout_id=rollout["id"])] == [
            "manual_start"
        ]
        status = await admin.status()
        assert [r["state"] for r in status["rollouts"]] == ["canary"]
        assert len(status["pools"]) == 2
        # A listing follows next_cursor: 1 item a page still reads every event.
        every = [e["id"] async for e in admin.pages("/audit", limit=1)]
        assert len(every) > 5 and every == sorted(every, reverse=True)

    assert {
        "listPools",
        "updatePool",
        "deleteTenant",
        "getApiKey",
        "listApiKeys",
        "actOnRollout",
        "getRolloutEvidence",
        "getAdminToken",
        "listAdminTokens",
        "listDecisions",
        "listAuditEvents",
    } <= set(seen)


async def test_an_unreachable_control_plane_is_the_same_typed_error_async() -> None:
    async with AsyncAdminClient("http://127.0.0.1:9", "t", timeout_s=2.0) as admin:
        with pytest.raises(Unreachable, match="control plane unreachable at"):
            await admin.pools.get(1)


def test_the_two_clients_offer_the_same_resources_and_methods() -> None:
    """Both are built over admin_operations; a method added to one front and not the
    other would show here."""
    sync, both = AdminClient("http://x"), AsyncAdminClient("http://x")
    names = [n for n in vars(sync) if n not in ("http", "base_url")]
    assert names == [n for n in vars(both) if n not in ("http", "base_url")]
    for name in names:
        a, b = getattr(sync, name), getattr(both, name)
        methods = {m for m in dir(type(a)) if not m.startswith("_")}
        assert methods == {m for m in dir(type(b)) if not m.startswith("_")}, name
        assert a.steps is b.steps, name
    sync.close()
