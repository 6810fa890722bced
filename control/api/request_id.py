"""Gives every control request an id: the caller's `x-request-id` when it is short
and inert (the gateway's rule), a fresh one otherwise. The id is echoed in the
response's `x-request-id` and set in `specwire.logs.REQUEST_ID`, so every
log line written while the request is handled (uvicorn's access line included)
carries it in JSON logs."""

import os
import re

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from specwire.logs import REQUEST_ID

HEADER = "x-request-id"
_VALID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


def request_id_from(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == HEADER.encode():
            given: str = value.decode("latin-1")
            if _VALID.match(given):
                return given
            break
    return os.urandom(16).hex()


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_from(scope)
        token = REQUEST_ID.set(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)[HEADER] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)
