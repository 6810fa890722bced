"""A TCP relay: the machine's loopback-only services, reachable from the fleet's hosts.

PostgreSQL and RabbitMQ listen on 127.0.0.1 only (and RabbitMQ's guest user is
loopback-only); a namespace cannot reach the root namespace's loopback. This
relay listens on the bridge address and copies bytes both ways to 127.0.0.1,
so the services see loopback clients and need no change. A closed side closes
the other at once (a killed client's database session ends, its broker
channel's unacknowledged messages are requeued).

    python -m bench.fleet.relay 10.231.7.1:5432=127.0.0.1:5432 10.231.7.1:5672=127.0.0.1:5672
"""

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _handler(host: str, port: int) -> Handler:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    return handle


async def serve(routes: list[tuple[str, int, str, int]]) -> None:
    servers = [
        await asyncio.start_server(_handler(to_host, to_port), listen_host, listen_port)
        for listen_host, listen_port, to_host, to_port in routes
    ]
    print("relay ready", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


def parse(spec: str) -> tuple[str, int, str, int]:
    listen, _, target = spec.partition("=")
    lh, _, lp = listen.rpartition(":")
    th, _, tp = target.rpartition(":")
    return lh, int(lp), th, int(tp)


def main() -> None:
    asyncio.run(serve([parse(a) for a in sys.argv[1:]]))


if __name__ == "__main__":
    main()
