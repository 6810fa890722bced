"""The deadline on receiving a request body: one timer for every read in flight."""

import asyncio
from typing import Any

import pytest
from fastapi import Request

from gateway.errors import RequestBodyTimeout
from gateway.proxy.intake import BodyDeadlines, read_json

BODY = b'{"model": "m", "prompt": "hi"}'


def request(messages: list[dict[str, Any]], *, then_wait: bool = True) -> Request:
    """A request whose receive channel yields `messages`, then waits for ever."""
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        if pending:
            await asyncio.sleep(0)
            return pending.pop(0)
        assert then_wait
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    scope = {"type": "http", "method": "POST", "path": "/v1/completions", "headers": []}
    return Request(scope, receive)


async def test_a_body_in_one_message_is_read_and_leaves_nothing_behind() -> None:
    deadlines = BodyDeadlines(0.05)
    got = await read_json(request([{"type": "http.request", "body": BODY}]), 4096, deadlines)
    assert got.doc == {"model": "m", "prompt": "hi"}
    assert deadlines.reading == 0
    await asyncio.sleep(0.1)  # the armed timer fires on an empty table: nothing happens
    assert deadlines.reading == 0


async def test_each_unfinished_read_ends_at_its_own_deadline() -> None:
    deadlines = BodyDeadlines(0.2)
    loop = asyncio.get_running_loop()

    async def one() -> float:
        started = loop.time()
        part = {"type": "http.request", "body": BODY[:5], "more_body": True}
        with pytest.raises(RequestBodyTimeout) as refused:
            await read_json(request([part]), 4096, deadlines)
        assert refused.value.status_code == 408
        assert refused.value.code == "request_body_timeout"
        assert refused.value.headers == {"Connection": "close"}
        return loop.time() - started

    first = asyncio.create_task(one())
    await asyncio.sleep(0.1)
    second = asyncio.create_task(one())
    await asyncio.sleep(0)
    assert deadlines.reading == 2
    waited = await asyncio.gather(first, second)
    assert all(0.19 < w < 0.35 for w in waited), waited  # the timer re-armed for the second
    assert deadlines.reading == 0


async def test_a_read_cancelled_by_someone_else_stays_cancelled() -> None:
    deadlines = BodyDeadlines(0.1)
    task = asyncio.create_task(read_json(request([]), 4096, deadlines))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert deadlines.reading == 0
    await asyncio.sleep(0.15)  # its deadline passes with nothing left to cancel
