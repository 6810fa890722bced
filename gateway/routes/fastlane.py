"""The two completion endpoints, served without FastAPI's routing and handler layers.

Every token of every streamed answer passes through the send chain of the
layers a request went in by; for the completion endpoints that chain is the
gateway's main CPU cost per request, so they are dispatched here, as plain
ASGI, ahead of the router. The handlers and their error rendering are the
same functions the documented routes in gateway.routes.openai use; every other
path (and every other method) goes on to FastAPI unchanged.
"""

from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.decision.reasons import NOT_ROUTED_HEADER
from gateway.errors import GatewayError, error_response, unexpected_error_response
from gateway.routes import openai

Handler = Callable[[Request], Awaitable[Response]]

# The documented POST routes of the OpenAI surface, read from its router so the
# two can never disagree on a path or a handler.
HANDLERS: dict[str, Handler] = {
    route.path: route.endpoint
    for route in openai.router.routes
    if isinstance(route, APIRoute) and "POST" in route.methods
}


class CompletionFastLane:
    """ASGI middleware: POST to a completion path goes straight to its handler."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = (
            HANDLERS.get(scope["path"])
            if scope["type"] == "http" and scope["method"] == "POST"
            else None
        )
        if handler is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive, send)
        try:
            response = await handler(request)
        except Exception as exc:
            # Every completion response names its decision; this one was refused
            # (or failed) before the request path made one.
            if getattr(request.state, "decision_header", None) is None:
                request.state.decision_header = NOT_ROUTED_HEADER
            if isinstance(exc, GatewayError):
                response = error_response(request, exc)
            else:
                response = unexpected_error_response(request)
        await response(scope, receive, send)
