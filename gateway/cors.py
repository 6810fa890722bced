"""CORS for browser callers, with the gateway's typed error for a refused preflight.

Starlette's middleware answers a preflight it refuses with a plain-text 400; a page's
developer (and the refusals dashboard) should see the same typed error body and the
same `specroute_gateway_refusals_total` sample as any other request refused before
its routing decision.
"""

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp

from gateway.errors import RequestValidationFailed
from gateway.metrics import GatewayMetrics

CORS_EXPOSED_HEADERS = ["x-request-id", "x-specroute-decision", "retry-after"]
"""Response headers a browser page may read (the rest of CORS' safelist aside)."""

CORS_REFUSED_CODE = "cors_disallowed"
"""The error code, and refusals label, of a preflight the gateway does not allow."""


class GatewayCORS(CORSMiddleware):
    """Starlette's CORS with listed origins, GET and POST, any request header."""

    def __init__(self, app: ASGIApp, origins: list[str], metrics: GatewayMetrics) -> None:
        super().__init__(
            app,
            allow_origins=origins,
            allow_methods=["GET", "POST"],
            allow_headers=["*"],
            expose_headers=CORS_EXPOSED_HEADERS,
            max_age=600,
        )
        self.metrics = metrics

    def preflight_response(self, request_headers: Headers) -> Response:
        answer = super().preflight_response(request_headers)
        if answer.status_code != 400:
            return answer
        # NOTE: Starlette's text names what failed ("Disallowed CORS origin, method");
        # the origin itself is not echoed, as the allowed list is not disclosed.
        failed = bytes(answer.body).decode().removeprefix("Disallowed CORS ").strip()
        err = RequestValidationFailed(
            f"CORS preflight refused: {failed} not allowed", code=CORS_REFUSED_CODE
        )
        self.metrics.observe_refusal(err.status_code, err.own_code)
        headers = {
            k: v for k, v in answer.headers.items() if k not in ("content-length", "content-type")
        }
        return JSONResponse(err.body_doc(), status_code=err.status_code, headers=headers)
