"""The two completion endpoints, served without FastAPI's routing and handler layers.

Every token of every streamed answer passes through the send chain of the
layers a request went in by; for the completion endpoints that chain is the
gateway's main CPU cost per request, so they are dispatched here, as plain
ASGI, ahead of the router. The handlers and their error rendering are the
same functions the documented routes in gateway.routes.openai use; every other
path (and every other method) goes on to FastAPI unchanged.

The lane is also where a completion request enters and leaves the process, so
it holds the process's concurrency limit (max_concurrent_requests): a request
over it is shed here, before its body is read or anything is booked.
"""

import time
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway import pipeline
from gateway.decision.reasons import NOT_ROUTED_HEADER
from gateway.errors import (
    GatewayError,
    GatewayOverloaded,
    error_response,
    unexpected_error_response,
)
from gateway.proxy.intake import request_id_of
from gateway.routes import openai
from gateway.state import GatewayState, RequestSlots

Handler = Callable[[Request], Awaitable[Response]]

# The documented POST routes of the OpenAI surface, read from its router so the
# two can never disagree on a path or a handler.
HANDLERS: dict[str, Handler] = {
    route.path: route.endpoint
    for route in openai.router.routes
    if isinstance(route, APIRoute) and "POST" in route.methods
}


class CompletionFastLane:
    """ASGI middleware: POST to a completion path goes straight to its handler,
    unless the process already serves its limit of them."""

    def __init__(self, app: ASGIApp, state: GatewayState | None = None) -> None:
        self.app = app
        self.state = state
        self.slots: RequestSlots | None = state.slots if state is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = (
            HANDLERS.get(scope["path"])
            if scope["type"] == "http" and scope["method"] == "POST"
            else None
        )
        if handler is None:
            await self.app(scope, receive, send)
            return
        slots = self.slots
        if slots is not None:
            if slots.in_flight >= slots.limit:
                await self._shed(slots, scope, receive, send)
                return
            # NOTE: held until the answer's last byte (a stream's whole life) and given
            # back however it ends: success, engine error, client gone, cancellation.
            slots.in_flight += 1
        try:
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
        finally:
            if slots is not None:
                slots.in_flight -= 1

    async def _shed(self, slots: RequestSlots, scope: Scope, receive: Receive, send: Send) -> None:
        """A typed 503 at once: no body read, no key looked up, no quota booked."""
        assert self.state is not None
        request = Request(scope, receive, send)
        seen = pipeline.Intake(request_id_of(request), scope["path"], time.monotonic(), time.time())
        request.state.decision_header = NOT_ROUTED_HEADER
        exc = GatewayOverloaded(slots.limit, self.state.settings.overload_retry_after_s)
        pipeline.refused_before_routing(self.state, seen, exc)
        await error_response(request, exc)(scope, receive, send)
