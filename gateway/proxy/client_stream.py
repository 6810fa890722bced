"""The client side of a relayed answer: the watch that notices a client leaving, and
the event-stream response that always runs its cleanup."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

# (send, the response-start message) -> whether the relay's last body message ended
# the response (more_body False), so that no empty one has to follow.
Relay = Callable[[Send, Message], Awaitable[bool]]


class DisconnectWatch:
    """Cancels the request's task the moment its client disconnects.

    One listener task per request, armed while the gateway waits on the engine
    (the first token, then the whole stream or body). A CancelledError raised
    while armed is ours when `swallow()` says so. `stop()` is synchronous and
    comes right after the watched await: had the client left before it, that
    await would have raised, so nothing after it (the accounting) can be cut off.
    """

    __slots__ = ("_armed", "_listener", "_loop", "_task", "left")

    def __init__(self, receive: Receive) -> None:
        self.left = False
        self._armed = True
        # NOTE: the loop once: each running-loop lookup is a getpid() syscall on 3.11.
        self._loop = asyncio.get_running_loop()
        self._task = _current_task(self._loop)
        self._listener = self._loop.create_task(_wait_disconnect(receive))
        self._listener.add_done_callback(self._on_done)

    def _on_done(self, listener: asyncio.Future[None]) -> None:
        if self._armed and not listener.cancelled() and listener.exception() is None:
            self.left = True
            self._task.cancel()

    def rebind(self) -> None:
        """Cancel the current task from now on (a response may run in another than its handler)."""
        self._task = _current_task(self._loop)

    def swallow(self) -> bool:
        """After a CancelledError: whether it was the client leaving (then it is undone)."""
        if self.left and self._armed:
            self._task.uncancel()
            return True
        return False

    def stop(self) -> None:
        self._armed = False
        self._listener.cancel()


def _current_task(loop: asyncio.AbstractEventLoop) -> asyncio.Task[Any]:
    task = asyncio.current_task(loop)
    assert task is not None
    return task


class RelayResponse(Response):
    """An event stream that always runs its cleanup, and stops the moment the client leaves.

    A direct ASGI send loop rather than Starlette's StreamingResponse: that one
    costs a task group, two tasks and an async generator per request, and its
    disconnect listener depends on the ASGI spec version the server announces.
    Here the request's DisconnectWatch (started before the first token) cancels
    the sending task when the client goes, and `on_close` runs even if the
    relay never started.
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        relay: Relay,
        *,
        watch: DisconnectWatch,
        headers: dict[str, str],
        on_close: Callable[[bool], Awaitable[None]],
    ) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers(headers)
        self._relay = relay
        self._watch = watch
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watch = self._watch
        watch.rebind()
        left = False
        try:
            start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
            if not await self._relay(send, start):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not watch.swallow():
                raise
            left = True  # our own cancellation, not the server's: the request just ends
        except OSError:
            left = True
        finally:
            watch.stop()
            with anyio.CancelScope(shield=True):
                await self._on_close(left)


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
