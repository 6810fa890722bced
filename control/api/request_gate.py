"""Authentication before the body, a cap on the body while it is read, and failed
authentication counted and rate-limited per source address.

An unauthenticated 200 MB POST used to be read in full (RSS 240 -> 611 MB) before
its 401, and a malformed body without a token got a 422 with field details. This
pure ASGI middleware runs first on every request that carries a body: on the admin
and internal APIs it checks that the bearer token is a live credential (401
otherwise, before one byte of the body is read), then reads the body counting bytes
and answers 413 `body_too_large` as soon as the count passes the route's limit
(Content-Length is checked up front; chunked bodies are counted as they arrive).
The routes still check scopes and roles; this only decides whether the body is read.

Every admin and internal request (with a body or not) is authenticated here, so
this is also where failures are counted (`specroute_control_auth_failures_total
{reason}`) and where an address that failed too often gets 429 `auth_rate_limited`
with Retry-After before its credential is looked up
(specwire.auth_throttle).
"""

import hmac
import re
from dataclasses import dataclass

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter
from sqlalchemy.exc import DBAPIError
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control.api.handlers import render, render_control_error, render_database_error
from control.credentials import active_token
from control.db import Database
from control.errors import Unauthorized
from control.settings import ControlSettings
from specwire import INTERNAL_PREFIX
from specwire.auth_throttle import (
    AUTH_FAILURE_REASONS,
    REASON_RATE_LIMITED,
    AuthFailureLimiter,
)

ADMIN_PREFIX = "/admin/v1"
BODYLESS_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# NOTE: the routes whose bodies may be larger than the default limit: a telemetry
# batch carries up to ~1,100 request records; an evaluation set up to 100,000 cases.
LARGE_BODY_ROUTES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("POST", re.compile(r"^/internal/v1/telemetry$")),
    ("POST", re.compile(r"^/admin/v1/eval-sets$")),
    ("POST", re.compile(r"^/admin/v1/eval-sets/[^/]+/versions$")),
    ("POST", re.compile(r"^/admin/v1/evaluations$")),
)


class BodyTooLarge(Exception):
    pass


@dataclass
class AuthFailures:
    limiter: AuthFailureLimiter
    counter: Counter


def failure_limiter(settings: ControlSettings) -> AuthFailureLimiter:
    """A fresh per-address failure table sized by `settings`."""
    return AuthFailureLimiter(
        burst=settings.auth_failure.burst,
        refill_per_second=settings.auth_failure.refill_per_second,
        max_addresses=settings.auth_failure.max_addresses,
    )


def auth_failure_counter(registry: CollectorRegistry) -> Counter:
    counter = Counter(
        "specroute_control_auth_failures",
        "Requests to the admin or internal API refused before their route: "
        "missing_token, invalid_token (unknown or revoked), rate_limited (the source "
        "address failed too often; 429). Unit: requests.",
        ["reason"],
        registry=registry,
    )
    for reason in AUTH_FAILURE_REASONS:
        counter.labels(reason)
    return counter


def install_auth_failures(app: FastAPI, registry: CollectorRegistry) -> None:
    settings: ControlSettings = app.state.settings
    app.state.auth_failures = AuthFailures(
        failure_limiter(settings), auth_failure_counter(registry)
    )


def source_address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


@dataclass(frozen=True)
class Refusal:
    """Why a request was refused before its body was read."""

    reason: str  # missing_token | invalid_token
    response: Response


def body_limit(settings: ControlSettings, method: str, path: str) -> int:
    """The most bytes the body of `method path` may have."""
    if any(m == method and pattern.match(path) for m, pattern in LARGE_BODY_ROUTES):
        return settings.max_large_body_bytes
    return settings.max_body_bytes


def realm_of(path: str) -> str | None:
    if path == ADMIN_PREFIX or path.startswith(ADMIN_PREFIX + "/"):
        return "admin"
    if path == INTERNAL_PREFIX or path.startswith(INTERNAL_PREFIX + "/"):
        return "internal"
    return None


def bearer_of(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            kind, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if kind.lower() == "bearer" and token.strip() else None
    return None


def _live_credential(database: Database, token: str) -> bool:
    with database.session() as session:
        return active_token(session, token) is not None


async def check_credential(scope: Scope, realm: str) -> Refusal | None:
    """None when the request's bearer token is one this realm knows; else the 401."""
    settings: ControlSettings = scope["app"].state.settings
    token = bearer_of(scope)
    if token is None:
        error = Unauthorized("missing bearer token", code="missing_token")
        return Refusal("missing_token", render_control_error(error))
    bootstrap = settings.admin_secret() if realm == "admin" else settings.internal_secret()
    # NOTE: constant-time, as in the routes' own auth.
    if hmac.compare_digest(token.encode(), bootstrap.encode()):
        return None
    database: Database = scope["app"].state.database
    try:
        live = await run_in_threadpool(_live_credential, database, token)
    except DBAPIError as exc:
        return Refusal("database", render_database_error(exc))
    if live:
        return None
    error = Unauthorized(f"invalid or revoked {realm} token")
    return Refusal("invalid_token", render_control_error(error))


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _too_large(limit: int) -> Response:
    return render(
        413,
        f"the request body is larger than {limit} bytes",
        "invalid_request_error",
        "body_too_large",
        details={"limit_bytes": limit},
    )


class RequestGate:
    """Pure ASGI middleware: credential first, then a size-capped read, then the app
    (with the body replayed)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings: ControlSettings = scope["app"].state.settings
        realm = realm_of(scope["path"])
        # NOTE: only the surfaces this process serves (SPECROUTE_API_SURFACES): the
        # other's paths are not routes here, and answer 404 like any unknown path.
        if realm is not None and realm in settings.api_surfaces:
            refusal = await _authenticate(scope, realm)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        if scope["method"] in BODYLESS_METHODS:
            await self.app(scope, receive, send)
            return
        limit = body_limit(settings, scope["method"], scope["path"])
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _too_large(limit)(scope, receive, send)
            return
        try:
            messages = await _read_capped(receive, limit)
        except BodyTooLarge:
            await _too_large(limit)(scope, receive, send)
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


async def _authenticate(scope: Scope, realm: str) -> Response | None:
    """None when the request may go on; else the 401, 429 or 503 to send."""
    failures: AuthFailures = scope["app"].state.auth_failures
    address = source_address(scope)
    wait = failures.limiter.retry_after(address)
    if wait is not None:
        failures.counter.labels(REASON_RATE_LIMITED).inc()
        return render(
            429,
            "too many failed authentications from this address",
            "rate_limit_error",
            "auth_rate_limited",
            details={"retry_after_s": wait},
            headers={"Retry-After": str(wait)},
        )
    refusal = await check_credential(scope, realm)
    if refusal is None:
        return None
    if refusal.reason in AUTH_FAILURE_REASONS:
        failures.limiter.failed(address)
        failures.counter.labels(refusal.reason).inc()
    return refusal.response


async def _read_capped(receive: Receive, limit: int) -> list[Message]:
    """The request's body messages, raising BodyTooLarge once they pass `limit` bytes
    (nothing past the limit is kept)."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages
        size += len(message.get("body", b""))
        if size > limit:
            raise BodyTooLarge
        if not message.get("more_body", False):
            return messages
