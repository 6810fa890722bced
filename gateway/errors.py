"""Typed gateway errors, each with its HTTP status and OpenAI-style body.

Every failure the request path can meet is one of these; `register_error_handlers`
renders them in one place, so a user mistake can never surface as a bare 500.
"""

import logging
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route

from gateway.decision.reasons import NOT_ROUTED_HEADER
from specwire.errors import ErrorBody, not_found_message

log = logging.getLogger(__name__)


class GatewayError(Exception):
    status_code: ClassVar[int] = 500
    error_type: ClassVar[str] = "internal_error"
    default_code: ClassVar[str | None] = None

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else self.default_code
        self.param = param
        self.headers = dict(headers or {})
        self.details = details

    @property
    def own_code(self) -> str:
        """The gateway's own name for the error (its code, else its type): a metric label,
        so never text a client or an engine chose."""
        return self.code or self.error_type

    def body(self) -> ErrorBody:
        return ErrorBody.of(self.message, self.error_type, self.code, self.param)

    def body_doc(self) -> dict[str, Any]:
        """The body as JSON; `error.details` only where there are some (the engine's
        status of an unexpected engine answer)."""
        doc = self.body().model_dump()
        if self.details:
            doc["error"]["details"] = self.details
        return doc


class InvalidJSONError(GatewayError):
    status_code = 400
    error_type = "invalid_request_error"
    default_code = "invalid_json"


class PayloadTooLargeError(GatewayError):
    status_code = 413
    error_type = "invalid_request_error"
    default_code = "payload_too_large"


class RequestBodyTimeout(GatewayError):
    """The client did not finish sending its body in time: answered (if it still can
    be), and the connection is closed so the rest of the body is never read."""

    status_code = 408
    error_type = "invalid_request_error"
    default_code = "request_body_timeout"

    def __init__(self, timeout_s: float) -> None:
        super().__init__(
            f"Request body not received within {timeout_s:g} s",
            headers={"Connection": "close"},
        )


class UnsupportedContentEncoding(GatewayError):
    """A request body compressed in an encoding the gateway does not read."""

    status_code = 415
    error_type = "invalid_request_error"
    default_code = "unsupported_content_encoding"


class RequestValidationFailed(GatewayError):
    """A body or parameter the API refuses: 400, as OpenAI answers, with a typed code."""

    status_code = 400
    error_type = "invalid_request_error"
    default_code = "invalid_value"


class AuthenticationFailed(GatewayError):
    status_code = 401
    error_type = "authentication_error"
    default_code = "invalid_api_key"


class AuthRateLimited(GatewayError):
    """Too many failed authentications from one source address."""

    status_code = 429
    error_type = "rate_limit_error"
    default_code = "auth_rate_limited"

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(
            "Too many failed authentications from this address",
            headers={"Retry-After": str(retry_after_s)},
        )


class PermissionDenied(GatewayError):
    status_code = 403
    error_type = "permission_error"
    default_code = "permission_denied"


class ModelNotFound(GatewayError):
    status_code = 404
    error_type = "invalid_request_error"
    default_code = "model_not_found"


class QuotaExceeded(GatewayError):
    status_code = 429
    error_type = "rate_limit_error"
    default_code = "quota_exceeded"

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        # NOTE: Retry-After takes whole seconds; round up so a client that obeys
        # it is not refused again.
        seconds = max(1, int(-(-retry_after_s // 1)))
        super().__init__(message, headers={"Retry-After": str(seconds)})
        self.retry_after_s = retry_after_s


class UpstreamClientError(GatewayError):
    """The engine refused the request as malformed (its 400, 404, 413 or 422); relayed
    with its status and a named code (never the engine's bare status number)."""

    error_type = "invalid_request_error"
    default_code = "upstream_rejected"

    def __init__(self, message: str, *, status_code: int, code: str | None = None) -> None:
        super().__init__(message, code=code, details={"engine_status": status_code})
        self.status_code = status_code  # type: ignore[misc]

    @property
    def own_code(self) -> str:
        # NOTE: `code` is the engine's text here; ours is the class's.
        return self.default_code or self.error_type


class UpstreamError(GatewayError):
    status_code = 502
    error_type = "upstream_error"
    default_code = "bad_gateway"


class ServiceUnavailable(GatewayError):
    status_code = 503
    error_type = "service_unavailable"
    default_code = "unavailable"


class ClientDisconnected(ServiceUnavailable):
    """The client left before its answer; nobody reads this, but the request ends typed."""

    default_code = "client_disconnected"

    def __init__(self) -> None:
        super().__init__("client disconnected")


class GatewayOverloaded(ServiceUnavailable):
    """The gateway process already serves `max_concurrent_requests` completion requests."""

    default_code = "gateway_overloaded"

    def __init__(self, limit: int, retry_after_s: int) -> None:
        super().__init__(
            f"The gateway is serving its limit of {limit} concurrent requests; retry later",
            headers={"Retry-After": str(retry_after_s)},
        )


class UpstreamTimeout(GatewayError):
    status_code = 504
    error_type = "timeout_error"
    default_code = "upstream_timeout"


def _context_headers(request: Request) -> dict[str, str]:
    """Request id and decision header, set by the request path once known."""
    headers: dict[str, str] = {}
    request_id = getattr(request.state, "request_id", None)
    if request_id:
        headers["x-request-id"] = request_id
    decision = getattr(request.state, "decision_header", None)
    if decision:
        headers["x-specroute-decision"] = decision
    return headers


def error_response(
    request: Request, exc: GatewayError, *, status_code: int | None = None
) -> JSONResponse:
    """The typed answer to `exc`, with the error's status or `status_code`.

    Every typed error answer is built here, so a request answered before its routing
    decision (no decision header yet, or the fast lane's not-routed one) is counted
    here, once, in specroute_gateway_refusals_total; one with a decision is counted
    in specroute_gateway_requests_total by its account instead.
    """
    status = exc.status_code if status_code is None else status_code
    if getattr(request.state, "decision_header", NOT_ROUTED_HEADER) == NOT_ROUTED_HEADER:
        # NOTE: a client that left reads no answer: 499, as requests_total counts one
        # that leaves after routing.
        counted = 499 if isinstance(exc, ClientDisconnected) else status
        request.app.state.gateway.metrics.observe_refusal(counted, exc.own_code)
    headers = _context_headers(request) | exc.headers
    return JSONResponse(exc.body_doc(), status_code=status, headers=headers)


def unexpected_error_response(request: Request) -> JSONResponse:
    """A bug, not a user mistake: logged with its traceback, answered as a typed 500."""
    # NOTE: no request text in the log line, only the type and request id.
    log.exception(
        "internal error", extra={"request_id": getattr(request.state, "request_id", None)}
    )
    return error_response(request, GatewayError("internal error", code="internal_error"))


def _allowed_methods(request: Request) -> str:
    """Every method some route of the app takes on the request's path, as `Allow`
    lists them ("" when none does)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if isinstance(route, Route) and route.methods:
            match, _ = route.matches(request.scope)
            if match is not Match.NONE:
                methods |= route.methods
    return ", ".join(sorted(methods))


def register_error_handlers(app: FastAPI) -> None:
    async def on_gateway_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, GatewayError)
        return error_response(request, exc)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {}
        loc = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return error_response(
            request,
            RequestValidationFailed(str(first.get("msg", "invalid request")), param=loc or None),
        )

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        err: GatewayError
        if exc.status_code == 404:
            message = not_found_message(request.url.path, str(exc.detail))
            err = ModelNotFound(message, code="not_found")
        elif exc.status_code == 405:
            err = RequestValidationFailed(str(exc.detail), code="method_not_allowed")
        else:
            err = RequestValidationFailed(str(exc.detail), code="http_error")
        resp = error_response(request, err, status_code=exc.status_code)
        # NOTE: a 405 must name the methods the path takes (RFC 9110 15.5.6): the
        # router's exception carries them in `Allow`, but only those of the first
        # route matching the path; the others' (HEAD on the models paths) join them.
        for name, value in (exc.headers or {}).items():
            resp.headers[name] = value
        allowed = _allowed_methods(request) if exc.status_code == 405 else ""
        if allowed:
            resp.headers["Allow"] = allowed
        return resp

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        return unexpected_error_response(request)

    app.add_exception_handler(GatewayError, on_gateway_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)
