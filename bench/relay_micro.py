"""The relay's CPU per streamed request, in one process, without sockets.

    python -m bench.relay_micro [--tokens 64] [--requests 2000] [--repeats 3]
        [--events-per-read 1] [--against OLD_TREE]

With `--against`, a second copy of the `gateway` package is loaded from
OLD_TREE (e.g. `git archive main gateway | tar -x -C /tmp/old`) into the same
process, and the two run in ABBA order (old, new, new, old, ...), so a drift
of the machine's state shifts both alike.

Drives `relay_stream` and its `RelayResponse` through gateway.proxy.relay_harness
(the relay tests' harness; this tree's, whichever tree's relay it drives), with
the engine side real from the HTTP parser up: a `_Connection` is fed
engine.fake's bytes (chunked, one token event per read, its last read the final
chunk, the usage chunk, `[DONE]` and the chunk terminator together, as
engine.fake writes them) and the client side is uvicorn's own `send` (httptools
`RequestResponseCycle`, writing into a transport that keeps the bytes), after
each of which the engine's next read arrives. What it leaves out: sockets, the
event loop's I/O and the pre-relay pipeline (auth, routing, accounting), so its
microseconds are the relay's share of a request only. `sends_per_request`
counts ASGI messages; `client_bytes` is what the client got, compared byte for
byte between the two trees.
"""

import argparse
import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any, cast

import uvloop
from starlette.types import Message
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from bench.trees import load_gateway
from engine.fake import FakeUpstream
from gateway.proxy.relay import RelayResult
from gateway.proxy.relay_harness import (
    HEAD,
    THESE,
    RelayModules,
    ScriptedEngine,
    Transport,
    chunked,
    relay_to,
)


def load_tree(root: Path) -> RelayModules:
    """A second, independent copy of `gateway.proxy` from another checkout."""
    names = ("gateway.proxy.relay", "gateway.proxy.engine_http", "gateway.proxy.upstream")
    loaded = load_gateway(root, names)
    return RelayModules(
        loaded["gateway.proxy.engine_http"],
        loaded["gateway.proxy.relay"],
        loaded["gateway.proxy.upstream"],
    )


_LOG = logging.getLogger("bench.relay_micro")


def engine_reads(tokens: int, per_read: int = 1) -> list[bytes]:
    """engine.fake's answer as the gateway's reads see it: `per_read` token events per
    read (more than one: as under load, when several wait in the socket buffer)."""
    fake = FakeUpstream(tokens=tokens, interval_s=0.0)
    token = chunked(fake._chunks["chat"])
    final = fake._final_chunks("chat", include_usage=True)
    reads = [token * min(per_read, tokens - i) for i in range(0, tokens, per_read)]
    return [HEAD, *reads, chunked(final) + b"0\r\n\r\n"]


async def one_request(
    tree: RelayModules, reads: list[bytes], out: list[bytes]
) -> tuple[RelayResult, int]:
    """One streamed request; the client's bytes land in `out`. (result, ASGI sends)."""
    engine = ScriptedEngine(reads, tree)
    sends = 0
    client = Transport()
    client.written = out
    cycle = RequestResponseCycle(
        scope=cast(Any, {"type": "http", "method": "POST", "http_version": "1.1"}),
        transport=cast(asyncio.Transport, client),
        flow=FlowControl(cast(asyncio.Transport, client)),
        logger=_LOG,
        access_logger=_LOG,
        access_log=False,
        default_headers=[],
        message_event=asyncio.Event(),
        expect_100_continue=False,
        keep_alive=True,
        on_response=lambda: None,
    )
    uvicorn_send = cycle.send

    async def send(message: Message) -> None:
        nonlocal sends
        sends += 1
        await uvicorn_send(cast(Any, message))
        # NOTE: the engine's next read arrives after the client's send, so every
        # read holds one event, as at low concurrency.
        engine.feed()

    result = await relay_to(engine, send, modules=tree)
    return result, sends


async def timed(
    tree: RelayModules, reads: list[bytes], requests: int
) -> tuple[float, int, RelayResult, bytes]:
    """Microseconds per request over `requests` requests, and the last one's facts."""
    out: list[bytes] = []
    result, sends = await one_request(tree, reads, out)
    begin = time.perf_counter()
    for _ in range(requests):
        out.clear()
        result, sends = await one_request(tree, reads, out)
    elapsed = time.perf_counter() - begin
    return elapsed / requests * 1e6, sends, result, b"".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--events-per-read", type=int, default=1)
    parser.add_argument("--against", type=Path, help="another checkout's root: run old vs new")
    args = parser.parse_args()
    reads = engine_reads(args.tokens, args.events_per_read)
    trees = {"new": THESE}
    order = ["new"] * args.repeats
    if args.against is not None:
        trees["old"] = load_tree(args.against.resolve())
        order = ["old", "new", "new", "old"] * args.repeats
    runs: dict[str, list[float]] = {name: [] for name in trees}
    facts: dict[str, dict[str, int]] = {}
    bodies: dict[str, bytes] = {}
    for name in order:
        us, sends, result, body = uvloop.run(timed(trees[name], reads, args.requests))
        assert result.streamed_tokens == args.tokens and result.usage is not None, result
        runs[name].append(us)
        facts[name] = {"sends_per_request": sends, "client_bytes": len(body)}
        bodies[name] = body
    if len(bodies) == 2:
        assert bodies["old"] == bodies["new"], "the two trees sent different bytes"
    report = {
        name: {
            "us_per_request": [round(u, 1) for u in runs[name]],
            "min_us": round(min(runs[name]), 1),
            "median_us": round(sorted(runs[name])[len(runs[name]) // 2], 1),
            **facts[name],
        }
        for name in trees
    }
    head = {"tokens": args.tokens, "events_per_read": args.events_per_read}
    print(json.dumps({**head, "requests": args.requests, **report}, indent=1))


if __name__ == "__main__":
    main()
