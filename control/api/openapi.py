"""The OpenAPI document: readable operationIds and the bearer security each route needs.

operationIds are the endpoint functions' names in camelCase (`list_pools` ->
`listPools`), so generated clients get usable method names; a test keeps them
unique. Security is read from each route's dependencies: routes behind
`control.api.auth.Reader` need the `admin:read` scope, behind `Writer`
`admin:write`; internal routes take the internal (gateway or agent) token;
the rest (health probes) declare `security: []`.
"""

from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from control.api.auth import Reader, Writer
from control.credentials import Scope
from specwire import INTERNAL_PREFIX

ADMIN_SCHEME = "adminToken"
INTERNAL_SCHEME = "internalToken"

# Endpoint names kept for their module's sake whose operationId reads better otherwise.
_RENAMED = {"get_evidence": "getRolloutEvidence"}


def operation_id(route: APIRoute) -> str:
    """`list_pools` -> `listPools` (FastAPI's default would be `list_pools_admin_v1_pools_get`)."""
    if route.name in _RENAMED:
        return _RENAMED[route.name]
    head, *rest = route.name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _scope_dependencies() -> dict[Any, Scope]:
    out: dict[Any, Scope] = {}
    aliases: tuple[tuple[Any, Scope], ...] = ((Reader, Scope.READ), (Writer, Scope.WRITE))
    for alias, scope in aliases:
        for marker in alias.__metadata__:
            out[marker.dependency] = scope
    return out


def _calls(dependant: Dependant) -> Iterator[Any]:
    for sub in dependant.dependencies:
        yield sub.call
        yield from _calls(sub)


def required_scopes(route: APIRoute) -> list[str]:
    """The admin scopes a route's dependencies demand (empty for internal routes)."""
    by_call = _scope_dependencies()
    found = {by_call[call] for call in _calls(route.dependant) if call in by_call}
    return sorted(scope.value for scope in found)


def build_document(app: FastAPI) -> dict[str, Any]:
    doc = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    components = doc.setdefault("components", {})
    components["securitySchemes"] = {
        ADMIN_SCHEME: {
            "type": "http",
            "scheme": "bearer",
            "description": (
                "An admin token: the bootstrap token (SPECROUTE_ADMIN_TOKEN, every scope) or one "
                "minted at POST /admin/v1/admin-tokens. Each operation lists the scope it needs "
                "(admin:read or admin:write); without it the answer is 403 missing_scope."
            ),
        },
        INTERNAL_SCHEME: {
            "type": "http",
            "scheme": "bearer",
            "description": "The gateway's internal token or an engine agent's enrolment token.",
        },
    }
    for route in app.routes:
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        operations = doc["paths"].get(route.path_format, {})
        security: list[dict[str, list[str]]]
        if route.path_format.startswith(INTERNAL_PREFIX):
            security = [{INTERNAL_SCHEME: []}]
        else:
            scopes = required_scopes(route)
            # NOTE: an empty list says "no auth" (the health probes), not "undocumented".
            security = [{ADMIN_SCHEME: scopes}] if scopes else []
        for method in route.methods:
            operation = operations.get(method.lower())
            if operation is not None:
                operation["security"] = security
    return doc


def install_openapi(app: FastAPI) -> None:
    """Replaces `app.openapi` with `build_document`, cached like FastAPI's own."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
