"""The error body every control-plane route returns, and its OpenAPI documentation."""

from typing import Any

from pydantic import BaseModel, Field

from specwire import ErrorDetail


class FieldError(BaseModel):
    loc: list[str | int] = Field(description="Where the invalid value is (body, query, header).")
    msg: str
    type: str


class ControlErrorDetail(ErrorDetail):
    details: dict[str, Any] = Field(
        default_factory=dict, description="Structured context, e.g. allowed actions."
    )
    field_errors: list[FieldError] | None = Field(
        default=None, description="Every invalid field, for 422 validation errors."
    )


class ControlErrorBody(BaseModel):
    """OpenAI-style `{"error": {...}}` plus control-plane details."""

    error: ControlErrorDetail


_DESCRIPTIONS = {
    401: "Missing or invalid bearer token.",
    403: "The token lacks the scope this route needs.",
    404: "Unknown id.",
    409: "Conflict: illegal state transition, duplicate name or integrity error.",
    412: "If-Match does not match the current version (a concurrent update won).",
    422: "Invalid body, query or header values.",
    428: "This mutation needs an If-Match header.",
    503: "The database is unreachable; retry after Retry-After seconds.",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` entries for a route: the common errors plus `codes`."""
    wanted = sorted({401, 403, 422, 503, *codes})
    return {
        code: {"model": ControlErrorBody, "description": _DESCRIPTIONS.get(code, "Error.")}
        for code in wanted
    }
