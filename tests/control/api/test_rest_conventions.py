"""The conventions every admin resource shares: cursor pages, refused unknown query
parameters, ETag / If-None-Match 304, and If-Match required on PATCH and DELETE."""

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.control.conftest import WAIVE_ALL
from tests.control.requests.records import batch, post, record


def _pool(client: TestClient, headers: dict[str, str], name: str) -> dict[str, Any]:
    response = client.post(
        "/admin/v1/pools",
        json={"name": name, "served_model_name": "m", "target_ref": "/x"},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def test_lists_page_with_limit_and_next_cursor(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    made = [_pool(app_client, admin_headers, f"p{i}")["id"] for i in range(3)]
    first = app_client.get("/admin/v1/pools?limit=2", headers=admin_headers).json()
    assert [p["id"] for p in first["items"]] == made[:2]
    assert first["next_cursor"] == str(made[1])
    second = app_client.get(
        "/admin/v1/pools",
        params={"limit": 2, "cursor": first["next_cursor"]},
        headers=admin_headers,
    ).json()
    assert second == {"items": second["items"], "next_cursor": None}
    assert [p["id"] for p in second["items"]] == made[2:]
    named = app_client.get("/admin/v1/pools?name=p1", headers=admin_headers).json()
    assert [p["id"] for p in named["items"]] == [made[1]]


@pytest.mark.parametrize(
    "path",
    [
        "/admin/v1/pairs",
        "/admin/v1/pools",
        "/admin/v1/segments",
        "/admin/v1/tenants",
        "/admin/v1/threshold-sets",
        "/admin/v1/rollouts",
        "/admin/v1/admin-tokens",
        "/admin/v1/eval-sets",
        "/admin/v1/evaluations",
        "/admin/v1/decisions",
        "/admin/v1/audit",
        "/admin/v1/requests",
    ],
)
def test_every_list_pages_and_refuses_unknown_or_bad_parameters(
    app_client: TestClient, admin_headers: dict[str, str], path: str
) -> None:
    page = app_client.get(path, params={"limit": 1}, headers=admin_headers)
    assert page.status_code == 200, page.text
    assert set(page.json()) == {"items", "next_cursor"}
    unknown = app_client.get(path, params={"stat": "canary"}, headers=admin_headers)
    assert unknown.status_code == 422
    error = unknown.json()["error"]
    assert (error["code"], error["param"]) == ("unknown_parameter", "stat")
    assert "limit" in error["details"]["allowed"]
    too_big = app_client.get(path, params={"limit": 501}, headers=admin_headers)
    assert too_big.status_code == 422
    assert too_big.json()["error"]["param"] == "limit"
    bad_cursor = app_client.get(path, params={"cursor": "abc"}, headers=admin_headers)
    assert bad_cursor.status_code == 422


def _urls(seeded: dict[str, Any]) -> dict[str, str]:
    return {
        "pair": f"/admin/v1/pairs/{seeded['pair']['id']}",
        "pool": f"/admin/v1/pools/{seeded['spec_pool']['id']}",
        "segment": f"/admin/v1/segments/{seeded['segment']['id']}",
        "rollout": f"/admin/v1/rollouts/{seeded['rollout']['id']}",
    }


CHANGES = {
    "pair": {"description": "changed"},
    "pool": {"desired_workers": 2},
    "segment": {"priority": 11},
    "rollout": {"stages": [2, 100]},
    "tenant": {"override_allowed": True},
}


@pytest.mark.parametrize("kind", ["pair", "pool", "segment", "rollout", "tenant"])
def test_versioned_resources_send_etags_and_need_if_match(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], kind: str
) -> None:
    if kind == "tenant":
        made = app_client.post("/admin/v1/tenants", json={"name": "acme"}, headers=admin_headers)
        url = f"/admin/v1/tenants/{made.json()['id']}"
    else:
        url = _urls(seeded)[kind]
    read = app_client.get(url, headers=admin_headers)
    tag = read.headers["ETag"]
    assert read.status_code == 200 and tag.startswith('"')

    cached = app_client.get(url, headers={**admin_headers, "If-None-Match": tag})
    assert (cached.status_code, cached.headers["ETag"], cached.content) == (304, tag, b"")
    other = app_client.get(url, headers={**admin_headers, "If-None-Match": '"999"'})
    assert other.status_code == 200

    missing = app_client.patch(url, json=CHANGES[kind], headers=admin_headers)
    assert missing.status_code == 428
    assert missing.json()["error"]["code"] == "if_match_required"
    stale = app_client.patch(
        url, json=CHANGES[kind], headers={**admin_headers, "If-Match": '"999"'}
    )
    assert stale.status_code == 412
    assert stale.json()["error"]["code"] == "stale_version"
    assert app_client.get(url, headers=admin_headers).json() == read.json()  # nothing applied

    applied = app_client.patch(url, json=CHANGES[kind], headers={**admin_headers, "If-Match": tag})
    assert applied.status_code == 200, applied.text
    assert applied.json()["version"] == read.json()["version"] + 1
    assert applied.headers["ETag"] != tag
    changed = app_client.get(url, headers={**admin_headers, "If-None-Match": tag})
    assert changed.status_code == 200  # the old ETag no longer matches

    assert app_client.delete(url, headers=admin_headers).status_code == 428
    old = app_client.delete(url, headers={**admin_headers, "If-Match": tag})
    assert old.status_code == 412


def test_a_pools_etag_changes_when_its_workers_do_but_if_match_still_holds(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    pool_id = seeded["spec_pool"]["id"]
    url = f"/admin/v1/pools/{pool_id}"
    agent = app_client.post(
        f"{url}/agent-tokens",
        json={"name": "agent", "allowed_endpoints": ["http://127.0.0.1:9001"]},
        headers=admin_headers,
    ).json()
    before = app_client.get(url, headers=admin_headers).headers["ETag"]
    beat = app_client.post(
        "/internal/v1/workers/w-1/heartbeat",
        json={
            "pool_id": pool_id,
            "endpoint_url": "http://127.0.0.1:9001",
            "healthy": True,
            "sent_at": datetime.now(UTC).isoformat(),
        },
        headers={"Authorization": f"Bearer {agent['token']}"},
    )
    assert beat.status_code == 200, beat.text
    after = app_client.get(url, headers={**admin_headers, "If-None-Match": before})
    assert after.status_code == 200 and after.headers["ETag"] != before
    assert [w["id"] for w in after.json()["workers"]] == ["w-1"]
    # The heartbeat did not change the pool's own fields: the old ETag still updates.
    patched = app_client.patch(
        url, json={"desired_workers": 2}, headers={**admin_headers, "If-Match": before}
    )
    assert patched.status_code == 200, patched.text


def test_a_list_of_exactly_limit_items_ends_on_that_page(
    app_client: TestClient,
    admin_headers: dict[str, str],
    internal_headers: dict[str, str],
    seeded: dict[str, Any],
) -> None:
    """`next_cursor` is null on the last page even when it is full: no client is sent
    on to an empty page (decisions, audit and requests once counted only `limit`)."""
    rid = seeded["rollout"]["id"]
    for action in ("start", "pause", "resume"):
        body = WAIVE_ALL if action == "start" else None
        acted = app_client.post(
            f"/admin/v1/rollouts/{rid}/{action}", headers=admin_headers, json=body
        )
        assert acted.is_success, acted.text
    stored = post(app_client, internal_headers, batch([record(f"r{i}") for i in range(3)]))
    assert stored.json()["requests_stored"] == 3

    for path in (
        "/admin/v1/decisions",
        "/admin/v1/audit",
        "/admin/v1/requests",
        "/admin/v1/pools",
        "/admin/v1/eval-sets",
    ):
        every = app_client.get(path, params={"limit": 500}, headers=admin_headers).json()["items"]
        n = len(every)
        assert n >= 2 or path == "/admin/v1/eval-sets", (path, n)
        full = app_client.get(path, params={"limit": max(n, 1)}, headers=admin_headers).json()
        assert (len(full["items"]), full["next_cursor"]) == (n, None), path
        if n < 2:
            continue
        first = app_client.get(path, params={"limit": n - 1}, headers=admin_headers).json()
        assert first["next_cursor"] == str(every[n - 2]["id"]), path
        rest = app_client.get(
            path, params={"limit": n - 1, "cursor": first["next_cursor"]}, headers=admin_headers
        ).json()
        assert [row["id"] for row in rest["items"]] == [every[-1]["id"]], path
        assert rest["next_cursor"] is None, path
