"""The gateway's CPU per streamed request, whole request path, in one process, no sockets.

    python -m bench.gateway_micro [--tokens 64] [--requests 2000] [--repeats 3]
        [--events-per-read 1] [--against OLD_TREE] [--profile FILE]

Where `bench.relay_micro` drives the relay alone, this drives the app as uvicorn
serves it: uvicorn's httptools protocol (`HttpToolsProtocol`, the server's own
request parser, ASGI cycle and `send`) on a keep-alive connection whose
transport keeps the bytes, fed one request after the other; the gateway app
built by `create_app` with its lifespan run, in snapshot-file mode as
`bench.gateway_overhead` runs it (engine.fake's pool, one tenant, in-memory
quota, telemetry windows aggregated but not flushed); and the engine side real
from the gateway's engine client down to its HTTP parser: `EngineClient` with
its connection pool, whose one connection's transport answers each request
with engine.fake's bytes (chunked, `--events-per-read` token events per read,
the last read the final chunk, the usage chunk, `[DONE]` and the terminator),
one read each time the gateway waits for the engine, delivered on the next turn
of the event loop as a socket's would be. What it leaves out: sockets and the
event loop's I/O, on both sides.

With `--against`, a second copy of the `gateway` package is loaded from
OLD_TREE (e.g. `git archive main gateway | tar -x -C /tmp/old`) into the same
process, its app built by its own `create_app`; both apps serve in one event
loop, and batches of `--requests` requests go to them in ABBA order (old, new,
new, old, ...) x `--repeats`, so a drift of the machine's state shifts both
alike; the bytes the client got for the last request of each tree are compared
between the trees, and every batch's last answer is checked whole. Figures are
microseconds of process CPU time (user + system) per request, and of wall time
beside them. `--profile FILE` runs this tree once
under cProfile and writes its stats to FILE (`python -m pstats FILE`).
"""

import argparse
import asyncio
import contextlib
import cProfile
import importlib
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import uvicorn
import uvloop
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from bench.gateway_overhead import API_KEY, MODEL, request_body, write_snapshot
from bench.relay_micro import engine_reads
from bench.trees import load_gateway

_UPSTREAM = "http://127.0.0.1:9"  # never dialled: the bench's engine client has its own
_PATH = "/v1/chat/completions"


@dataclass
class Tree:
    """One copy of the gateway package: its modules, by name."""

    modules: dict[str, Any]

    def module(self, name: str) -> Any:
        return self.modules[name]

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Its modules are `gateway.*` in sys.modules (for imports done at call time)."""
        ours = {n: m for n, m in sys.modules.items() if n.split(".")[0] == "gateway"}
        for name in ours:
            del sys.modules[name]
        sys.modules.update(self.modules)
        try:
            yield
        finally:
            for name in [n for n in sys.modules if n.split(".")[0] == "gateway"]:
                del sys.modules[name]
            sys.modules.update(ours)


_NEEDED = (
    "gateway.app",
    "gateway.settings",
    "gateway.proxy.engine_http",
    "gateway.quota.memory",
)


def this_tree() -> Tree:
    for name in _NEEDED:
        importlib.import_module(name)
    return Tree({n: m for n, m in sys.modules.items() if n.split(".")[0] == "gateway"})


def load_tree(root: Path) -> Tree:
    """A second, independent copy of the `gateway` package from another checkout."""
    return Tree(load_gateway(root, _NEEDED))


class _ClientTransport:
    """The client's side of the keep-alive connection: keeps what the gateway wrote."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def writelines(self, data: list[bytes]) -> None:
        self.written.extend(data)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def close(self) -> None: ...
    def set_protocol(self, protocol: object) -> None: ...

    def get_extra_info(self, name: str, default: object = None) -> object:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8000)}.get(
            name, default
        )


class _EngineTransport:
    """The engine's side of a pooled connection: each request written (re)starts the
    answer, one read of which is delivered each time the gateway waits."""

    def __init__(self, reads: list[bytes]) -> None:
        self.reads = reads
        self.pending: Iterator[bytes] = iter(())
        self.requests: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.requests.append(data)
        self.pending = iter(self.reads)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...
    def close(self) -> None: ...

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default


def engine_client(tree: Tree, reads: list[bytes]) -> Any:
    """The tree's `EngineClient`, its connections to engine.fake's bytes in memory."""
    engine_http = tree.module("gateway.proxy.engine_http")

    class BenchConnection(engine_http._Connection):  # type: ignore[name-defined,misc]
        async def wait(self, deadline: float | None = None) -> None:
            transport = cast(_EngineTransport, self.transport)
            data = next(transport.pending, None)
            if data is not None:
                self._loop.call_soon(self.data_received, data)
            await super().wait(deadline)

    class BenchEngineClient(engine_http.EngineClient):  # type: ignore[name-defined,misc]
        async def _connect(self, origin: Any) -> Any:
            conn = BenchConnection(asyncio.get_running_loop())
            conn.connection_made(_EngineTransport(reads))
            return conn

    return BenchEngineClient(connect_timeout_s=5.0)


@dataclass
class Served:
    """One tree's app behind uvicorn's protocol on one keep-alive connection."""

    protocol: HttpToolsProtocol
    client: _ClientTransport
    done: Callable[[], "asyncio.Future[None]"]


@contextlib.asynccontextmanager
async def serving(tree: Tree, reads: list[bytes]) -> AsyncIterator[Served]:
    """The tree's app with its lifespan running, behind uvicorn's HTTP protocol."""
    loop = asyncio.get_running_loop()
    with tree.active():
        settings = tree.module("gateway.settings").GatewaySettings()
        app = tree.module("gateway.app").create_app(settings)
        lifespan = app.router.lifespan_context(app)
        await lifespan.__aenter__()
    state = app.state.gateway
    await state.engine_client.close()
    state.engine_client = engine_client(tree, reads)
    finished: list[asyncio.Future[None]] = []

    async def app_then_done(scope: Any, receive: Any, send: Any) -> None:
        try:
            await app(scope, receive, send)
        finally:
            if finished and not finished[-1].done():
                finished[-1].set_result(None)

    def next_done() -> asyncio.Future[None]:
        finished.append(loop.create_future())
        del finished[:-1]
        return finished[-1]

    # As `gateway serve` runs uvicorn (proxy headers on, its --log-level warning).
    config = uvicorn.Config(
        cast(Any, app_then_done),
        http="httptools",
        lifespan="off",
        log_level="warning",
        access_log=False,
    )
    config.load()
    protocol = HttpToolsProtocol(config, ServerState(), {}, loop)
    client = _ClientTransport()
    protocol.connection_made(cast(asyncio.Transport, client))
    try:
        yield Served(protocol, client, next_done)
    finally:
        protocol.connection_lost(None)
        with tree.active():
            await lifespan.__aexit__(None, None, None)


def http_request(request_id: str) -> bytes:
    body = request_body("chat")
    head = (
        f"POST {_PATH} HTTP/1.1\r\nhost: 127.0.0.1:8000\r\n"
        f"authorization: Bearer {API_KEY}\r\ncontent-type: application/json\r\n"
        f"x-request-id: {request_id}\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def one_request(served: Served, request: bytes) -> bytes:
    """One streamed request; what the client got."""
    served.client.written.clear()
    done = served.done()
    served.protocol.data_received(request)
    await done
    return b"".join(served.client.written)


async def batch(
    served: Served, requests: int, profile: cProfile.Profile | None = None
) -> tuple[float, float, bytes]:
    """CPU and wall microseconds per request over `requests` requests, and the last
    request's bytes."""
    request = http_request("bench-request-0001")
    if profile is not None:
        profile.enable()
    body = b""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(requests):
        body = await one_request(served, request)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if profile is not None:
        profile.disable()
    return cpu / requests * 1e6, wall / requests * 1e6, body


async def timed(
    tree: Tree, reads: list[bytes], requests: int, profile: cProfile.Profile | None = None
) -> tuple[float, float, bytes]:
    """One tree's app, warmed by one request (the pool's connection), then `batch`."""
    async with serving(tree, reads) as served:
        await one_request(served, http_request("bench-request-0001"))
        return await batch(served, requests, profile)


async def interleaved(
    trees: dict[str, Tree], reads: list[bytes], requests: int, order: list[str]
) -> dict[str, list[tuple[float, float, bytes]]]:
    """Every tree's app serving in this one event loop, warmed; then one `batch` of
    `requests` per entry of `order`, in that order."""
    runs: dict[str, list[tuple[float, float, bytes]]] = {name: [] for name in trees}
    async with contextlib.AsyncExitStack() as stack:
        served = {
            name: await stack.enter_async_context(serving(tree, reads))
            for name, tree in trees.items()
        }
        for one in served.values():
            await one_request(one, http_request("bench-request-0001"))
        for name in order:
            runs[name].append(await batch(served[name], requests))
    return runs


def check(body: bytes, tokens: int) -> None:
    head, _, rest = body.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert rest.count(b"tok") == tokens and rest.endswith(b"0\r\n\r\n"), rest[-200:]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--events-per-read", type=int, default=1)
    parser.add_argument("--against", type=Path, help="another checkout's root: run old vs new")
    parser.add_argument("--profile", type=Path, help="cProfile this tree once; stats to FILE")
    args = parser.parse_args()
    reads = engine_reads(args.tokens, args.events_per_read)
    with tempfile.TemporaryDirectory() as tmp:
        snap = Path(tmp) / "snapshot.json"
        write_snapshot(snap, _UPSTREAM)
        os.environ["SPECROUTE_GATEWAY_SNAPSHOT_FILE"] = str(snap)
        for name in ("SPECROUTE_GATEWAY_REDIS_URL", "SPECROUTE_GATEWAY_GATEWAY_ID"):
            os.environ.pop(name, None)
        trees = {"new": this_tree()}
        if args.profile is not None:
            profile = cProfile.Profile()
            uvloop.run(timed(trees["new"], reads, args.requests, profile))
            profile.dump_stats(args.profile)
            return
        order = ["new"] * args.repeats
        if args.against is not None:
            trees["old"] = load_tree(args.against.resolve())
            order = ["old", "new", "new", "old"] * args.repeats
        runs = uvloop.run(interleaved(trees, reads, args.requests, order))
    cpu = {name: [c for c, _, _ in done] for name, done in runs.items()}
    wall = {name: [w for _, w, _ in done] for name, done in runs.items()}
    bodies = {name: done[-1][2] for name, done in runs.items()}
    for done in runs.values():
        for _, _, body in done:
            check(body, args.tokens)
    if len(bodies) == 2:
        assert bodies["old"] == bodies["new"], "the two trees sent different bytes"

    def med(values: list[float]) -> float:
        return round(sorted(values)[len(values) // 2], 1)

    report: dict[str, Any] = {
        name: {
            "cpu_us_per_request": [round(u, 1) for u in cpu[name]],
            "cpu_min_us": round(min(cpu[name]), 1),
            "cpu_median_us": med(cpu[name]),
            "wall_min_us": round(min(wall[name]), 1),
            "wall_median_us": med(wall[name]),
            "client_bytes": len(bodies[name]),
        }
        for name in trees
    }
    if "old" in trees:
        report["new_over_old"] = {
            "cpu_min": round(min(cpu["new"]) / min(cpu["old"]), 3),
            "cpu_median": round(med(cpu["new"]) / med(cpu["old"]), 3),
        }
    head = {"model": MODEL, "tokens": args.tokens, "events_per_read": args.events_per_read}
    print(json.dumps({**head, "requests": args.requests, **report}, indent=1))


if __name__ == "__main__":
    main()
