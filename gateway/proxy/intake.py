"""From raw HTTP request to an authenticated tenant and a validated body."""

import json
import re
import uuid
from typing import Any, TypeVar

from fastapi import Request
from pydantic import ValidationError

from control.contract import TenantSpec
from gateway.errors import (
    AuthenticationFailed,
    InvalidJSONError,
    PayloadTooLargeError,
    RequestValidationFailed,
    ServiceUnavailable,
)
from gateway.proxy.schemas import SamplingParams
from gateway.snapshot.store import SnapshotStore

Body = TypeVar("Body", bound=SamplingParams)

# Caller-chosen ids are echoed in headers and logs: keep them short and inert.
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


def request_id_of(request: Request) -> str:
    given = request.headers.get("x-request-id")
    rid = given if given is not None and _REQUEST_ID.match(given) else uuid.uuid4().hex
    request.state.request_id = rid
    return rid


def authenticate(request: Request, store: SnapshotStore) -> TenantSpec:
    if not store.ready:
        raise ServiceUnavailable("The gateway has no policy snapshot yet", code="not_ready")
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise AuthenticationFailed("Missing bearer API key")
    tenant = store.tenant_for_key(key.strip())
    if tenant is None:
        raise AuthenticationFailed("Incorrect API key provided")
    return tenant


async def read_json(request: Request, max_bytes: int) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise PayloadTooLargeError(f"Request body exceeds {max_bytes} bytes")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > max_bytes:
            raise PayloadTooLargeError(f"Request body exceeds {max_bytes} bytes")
    try:
        doc = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise InvalidJSONError("Request body is not valid JSON") from exc
    if not isinstance(doc, dict):
        raise RequestValidationFailed("Request body must be a JSON object", code="invalid_type")
    return doc


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; re-serialized they would reach the engine as invalid JSON.
    raise ValueError(f"{name} is not a valid JSON value")


def validate(model: type[Body], doc: dict[str, Any]) -> Body:
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        param = ".".join(str(p) for p in first["loc"]) or None
        raise RequestValidationFailed(
            f"{param}: {first['msg']}" if param else str(first["msg"]), param=param
        ) from exc
