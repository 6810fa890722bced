"""The streaming relay's ASGI messages for an engine answer fed read by read.

The engine side is the real HTTP parser (`_Connection`) fed scripted reads; the
client side records every ASGI message. What is checked: the client's events,
how the response ends (in the last event's message, or in an empty one), and
whether the engine connection was kept for reuse.
"""

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from starlette.types import Message

from gateway.proxy.relay import RelayResult
from gateway.proxy.relay_harness import HEAD, ScriptedEngine, chunked, relay_to

TOKEN = b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}\n\n'  # noqa: E501
USAGE = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
    b'"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n'
)
DONE = b"data: [DONE]\n\n"
END = b"0\r\n\r\n"


@dataclass
class Relayed:
    messages: list[Message]
    result: RelayResult
    reused: bool

    @property
    def bodies(self) -> list[Message]:
        return [m for m in self.messages if m["type"] == "http.response.body"]

    @property
    def events(self) -> list[Any]:
        text = b"".join(m["body"] for m in self.bodies).decode()
        return [
            e[6:] if e == "data: [DONE]" else json.loads(e[6:]) for e in text.split("\n\n") if e
        ]


async def relay(reads: list[bytes], *, paced: bool = False) -> Relayed:
    """The client's messages for an engine answer arriving as `reads`, each after a
    client send (the first after the status line); `paced`: one every millisecond
    instead, sends or not."""
    engine = ScriptedEngine([HEAD, *reads])
    messages: list[Message] = []

    async def send(message: Message) -> None:
        messages.append(message)
        if not paced:
            engine.feed()

    async def pace() -> None:
        for _ in reads:
            await asyncio.sleep(0.001)
            engine.feed()

    pacer = asyncio.create_task(pace()) if paced else None
    result = await asyncio.wait_for(relay_to(engine, send, timeout_s=5.0), 5.0)
    if pacer is not None:
        await pacer
    return Relayed(messages, result, reused=engine.reused)


async def test_done_and_the_engines_end_in_one_read_end_the_response_in_one_message() -> None:
    relayed = await relay([chunked(TOKEN), chunked(TOKEN), chunked(USAGE + DONE) + END])

    assert [m.get("more_body") for m in relayed.bodies] == [True, True, False]
    assert relayed.bodies[-1]["body"] == DONE  # the usage chunk was not asked for
    assert relayed.events[-1] == "[DONE]"
    assert [e["choices"][0]["delta"]["content"] for e in relayed.events[:-1]] == [" tok"] * 2
    assert relayed.result.streamed_tokens == 2
    assert relayed.result.usage is not None and relayed.result.usage.completion_tokens == 2
    assert relayed.reused


async def test_done_before_the_engines_end_is_sent_at_once_and_an_empty_message_ends() -> None:
    relayed = await relay([chunked(TOKEN), chunked(USAGE + DONE), END])

    assert [(m["body"], m.get("more_body")) for m in relayed.bodies] == [
        (TOKEN, True),
        (DONE, True),
        (b"", False),
    ]
    assert relayed.result.streamed_tokens == 1
    assert relayed.reused


async def test_an_event_after_done_in_the_same_read_is_still_forwarded() -> None:
    relayed = await relay([chunked(TOKEN), chunked(DONE + TOKEN) + END])

    assert [m.get("more_body") for m in relayed.bodies] == [True, True, False]
    assert relayed.bodies[1]["body"] == DONE + TOKEN
    assert relayed.bodies[2]["body"] == b""
    assert relayed.result.streamed_tokens == 2
    assert relayed.reused


PAYLOAD = TOKEN[6:-2]


async def test_every_spelling_of_a_token_event_reaches_the_client_as_one_form() -> None:
    spellings = [
        b"data: " + PAYLOAD + b"\n\n",
        b"data:" + PAYLOAD + b"\n\n",
        b"data:  " + PAYLOAD + b"\n\n",
        b"data: " + PAYLOAD + b"\r\n\r\n",
        b"data: " + PAYLOAD + b"\r\n\n",
        b": keep-alive\ndata: " + PAYLOAD + b"\n\n",
    ]
    relayed = await relay([chunked(s) for s in spellings] + [chunked(DONE) + END])

    assert [m["body"] for m in relayed.bodies] == [TOKEN] * len(spellings) + [DONE]
    assert relayed.result.streamed_tokens == len(spellings)


async def test_an_event_split_across_reads_is_joined_before_a_whole_one_follows() -> None:
    reads = [TOKEN[:40], TOKEN[40:-1], TOKEN[-1:], TOKEN, DONE]
    relayed = await relay([chunked(r) for r in reads] + [END], paced=True)

    assert b"".join(m["body"] for m in relayed.bodies) == TOKEN * 2 + DONE
    assert relayed.result.streamed_tokens == 2


async def test_a_token_event_with_an_engine_field_is_stripped_not_forwarded_as_read() -> None:
    doc = json.loads(PAYLOAD)
    doc["choices"][0]["stop_reason"] = None  # vLLM's own, not OpenAI's
    doc["kv_transfer_params"] = {"x": 1}
    relayed = await relay([chunked(b"data: " + json.dumps(doc).encode() + b"\n\n"), END])

    (event,) = relayed.events
    assert "kv_transfer_params" not in event and "stop_reason" not in event["choices"][0]
    assert event["choices"][0]["delta"]["content"] == " tok"
    assert relayed.result.streamed_tokens == 1
