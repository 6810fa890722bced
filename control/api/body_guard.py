"""Refuses JSON bodies no valid request has, before any route parses them.

Two shapes got through validation and failed later as 500s: nesting deep enough
to exhaust serialization (`engine_args` 400 levels deep) and lone UTF-16
surrogates (`"\\ud800"` is legal JSON but no database or UTF-8 encoder takes
it). Both are now a 422 naming the problem. Admin and internal bodies are small,
so parsing them once more here costs little; bodies that do not parse are left
to the route, which answers its usual 422.
"""

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control.api.handlers import render

MAX_DEPTH = 32
"""Deepest nesting of objects and arrays a body may have (engine args need ~3)."""


class BodyProblem(ValueError):
    pass


def check_document(doc: Any, *, max_depth: int = MAX_DEPTH) -> None:
    """Raises BodyProblem for nesting beyond max_depth or a string (key or value)
    that is not valid Unicode."""
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            _check_text(node)
        elif isinstance(node, dict | list):
            if depth >= max_depth:
                raise BodyProblem(f"the body nests deeper than {max_depth} levels")
            if isinstance(node, dict):
                for key, value in node.items():
                    _check_text(key)
                    stack.append((value, depth + 1))
            else:
                stack.extend((value, depth + 1) for value in node)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BodyProblem("the body contains a lone UTF-16 surrogate (invalid Unicode)") from None


class BodyGuard:
    """Pure ASGI middleware: reads a JSON body, checks it, and replays it to the app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        chunks: list[bytes] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        problem = _problem(b"".join(chunks))
        if problem is not None:
            response = render(422, problem, "invalid_request_error", "invalid_body")
            await response(scope, receive, send)
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _problem(body: bytes) -> str | None:
    if not body:
        return None
    try:
        doc = json.loads(body)
    except RecursionError:
        return f"the body nests deeper than {MAX_DEPTH} levels"
    except ValueError:
        return None  # not JSON: the route's own validation answers
    try:
        check_document(doc)
    except BodyProblem as exc:
        return str(exc)
    return None
