"""What the policy benchmark needs from demo.traffic: one seeded schedule whatever was
shed, the per-segment override header on the wire, and no sampling seed in a body (the
gateway sends a seeded sampled request to the baseline arm). The server is a real socket
that reads each request's head and never answers, so every request stays in flight
and the concurrency bound sheds."""

import asyncio
import json

from demo.plan import SegmentPlan
from demo.traffic import TrafficGenerator


class SilentServer:
    """Accepts HTTP requests, records their heads, never responds."""

    def __init__(self) -> None:
        self.heads: list[dict[str, str]] = []
        self.bodies: list[dict[str, object]] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
            lines = raw.decode().split("\r\n")[1:]
            head = {
                k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines) if k
            }
            self.heads.append(head)
            body = await reader.readexactly(int(head.get("content-length", "0")))
            self.bodies.append(json.loads(body) if body else {})
            await reader.read()  # until the client gives up
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> "SilentServer":
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._server is not None
        self._server.close()


def _segments(max_in_flight: int) -> list[SegmentPlan]:
    return [
        SegmentPlan("code", "code", "acme", 0.0, ("a", "b"), 8, 30.0, max_in_flight, 4),
        SegmentPlan("labels", "classify", "acme", 0.8, ("c",), 2, 30.0, max_in_flight, 4),
    ]


async def _arrivals(url: str, max_in_flight: int, seed: int) -> dict[str, tuple[int, int]]:
    gen = TrafficGenerator(
        url,
        {"acme": "k"},
        _segments(max_in_flight),
        model="tiny",
        seed=seed,
        headers={"code": {"x-specroute-speculation": "on"}},
    )
    await gen.run(1.0, drain_s=0.2)
    return {name: (c.sent, c.shed) for name, c in gen.counters.items()}


async def test_shedding_does_not_shift_the_schedule_and_headers_reach_the_wire() -> None:
    async with SilentServer() as silent:
        tight = await _arrivals(silent.url, 1, seed=3)
        loose = await _arrivals(silent.url, 1000, seed=3)
        other = await _arrivals(silent.url, 1000, seed=4)
        await asyncio.sleep(0.2)
    # Bound 1: one request in flight per segment, every later arrival shed.
    assert all(sent == 1 and shed > 5 for sent, shed in tight.values()), tight
    assert all(shed == 0 for _, shed in loose.values()), loose
    # Same seed: the same arrivals per segment, whatever was shed.
    assert {k: sum(v) for k, v in tight.items()} == {k: sum(v) for k, v in loose.items()}
    assert other != loose

    tasks = {h.get("x-specroute-task") for h in silent.heads}
    assert tasks == {"code", "classify"}
    for head in silent.heads:
        override = head.get("x-specroute-speculation")
        assert override == ("on" if head["x-specroute-task"] == "code" else None)
    # A sampled segment (labels, temperature 0.8) sends no seed, as a greedy one.
    sampled = [
        b
        for b, h in zip(silent.bodies, silent.heads, strict=True)
        if h["x-specroute-task"] == "classify"
    ]
    assert sampled and {b["temperature"] for b in sampled} == {0.8}
    assert all("seed" not in b for b in silent.bodies)
