"""Control's OpenAPI document validates and is usable by generated clients:
bearer security with each operation's scope, readable unique operationIds."""

import re
from typing import Any

from fastapi.testclient import TestClient
from openapi_spec_validator import validate


def _document(app_client: TestClient) -> dict[str, Any]:
    response = app_client.get("/openapi.json")
    assert response.status_code == 200
    doc: dict[str, Any] = response.json()
    return doc


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in doc["paths"].items()
        for method, operation in item.items()
    ]


def test_the_document_validates_against_the_openapi_schema(app_client: TestClient) -> None:
    doc = _document(app_client)
    validate(doc)  # raises on an invalid document (e.g. a response header without schema)
    assert doc["openapi"].startswith("3.1")


def test_operation_ids_are_readable_and_unique(app_client: TestClient) -> None:
    ops = _operations(_document(app_client))
    ids = [op["operationId"] for _, _, op in ops]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z]+(?:[A-Z][a-z0-9]*)*", i) for i in ids), ids
    by_route = {(path, method): op["operationId"] for path, method, op in ops}
    assert by_route[("/admin/v1/pools", "get")] == "listPools"
    assert by_route[("/admin/v1/rollouts/{rollout_id}", "get")] == "getRollout"
    assert by_route[("/admin/v1/tenants/{tenant_id}/keys", "post")] == "createApiKey"
    assert by_route[("/admin/v1/rollouts/{rollout_id}/evidence", "get")] == "getRolloutEvidence"


def test_every_operation_declares_bearer_security_with_its_scope(app_client: TestClient) -> None:
    doc = _document(app_client)
    schemes = doc["components"]["securitySchemes"]
    assert schemes["adminToken"] == {**schemes["adminToken"], "type": "http", "scheme": "bearer"}
    assert schemes["internalToken"]["scheme"] == "bearer"
    security = {(p, m): op.get("security") for p, m, op in _operations(doc)}
    assert all(s is not None for s in security.values()), [k for k, s in security.items() if not s]
    assert security[("/admin/v1/pools", "get")] == [{"adminToken": ["admin:read"]}]
    assert security[("/admin/v1/pools", "post")] == [{"adminToken": ["admin:write"]}]
    assert security[("/admin/v1/rollouts/{rollout_id}/{action}", "post")] == [
        {"adminToken": ["admin:write"]}
    ]
    assert security[("/internal/v1/snapshot", "get")] == [{"internalToken": []}]
    public = sorted(p for (p, _), s in security.items() if s == [])
    assert all(not p.startswith(("/admin", "/internal")) for p in public), public


def test_declared_scopes_are_what_the_routes_enforce(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    """A read-only token passes every GET the document marks admin:read and is 403 on
    a route it marks admin:write."""
    minted = app_client.post(
        "/admin/v1/admin-tokens",
        json={"name": "viewer", "scopes": ["admin:read"]},
        headers=admin_headers,
    )
    viewer = {"Authorization": f"Bearer {minted.json()['token']}"}
    assert app_client.get("/admin/v1/pools", headers=viewer).status_code == 200
    refused = app_client.delete("/admin/v1/pools/1", headers={**viewer, "If-Match": "*"})
    assert refused.status_code == 403
    assert refused.json()["error"]["details"]["required_scope"] == "admin:write"
