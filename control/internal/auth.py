"""Bearer auth for the internal API: one shared secret for gateways and engine agents."""

import hmac

from fastapi import Request

from control.errors import Unauthorized
from control.settings import ControlSettings


def require_internal_token(request: Request) -> None:
    settings: ControlSettings = request.app.state.settings
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing bearer token", code="missing_token")
    expected = settings.internal_secret()
    # NOTE: constant-time, so response timing does not reveal a matching prefix.
    if not hmac.compare_digest(token.strip().encode(), expected.encode()):
        raise Unauthorized("invalid internal token")
