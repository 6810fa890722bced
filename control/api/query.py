"""Refuses query parameters a route does not declare (typed 422 `unknown_parameter`).

FastAPI ignores unknown parameters, so `pools?limit=1` on a route without paging,
or a misspelt filter (`?stat=canary`), silently returned everything. Installed as
a router dependency on the admin API.
"""

from fastapi import Request
from fastapi.dependencies.utils import get_flat_dependant
from fastapi.routing import APIRoute

from control.errors import InvalidRequest

_DECLARED: dict[int, frozenset[str]] = {}


def _declared(route: APIRoute) -> frozenset[str]:
    """The query parameters of the route and its dependencies (cached per route)."""
    known = _DECLARED.get(id(route))
    if known is None:
        flat = get_flat_dependant(route.dependant)
        known = _DECLARED[id(route)] = frozenset(param.alias for param in flat.query_params)
    return known


def reject_unknown_query(request: Request) -> None:
    route = request.scope.get("route")
    if not isinstance(route, APIRoute) or not request.query_params:
        return
    declared = _declared(route)
    unknown = sorted(set(request.query_params) - declared)
    if unknown:
        takes = ", ".join(sorted(declared)) or "no query parameters"
        raise InvalidRequest(
            f"unknown query parameter {unknown[0]!r}; this route takes: {takes}",
            code="unknown_parameter",
            details={"param": unknown[0], "allowed": sorted(declared)},
        )
