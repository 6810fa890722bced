"""A TCP proxy in front of a real Redis that delays every reply: a slowed Redis.

Redis itself cannot be made to answer slowly on purpose for some calls and not others
(``CLIENT PAUSE`` stops every client), so the proxy holds each chunk Redis sends back
for a delay drawn from a seeded range: with a quota timeout of 0.1 s and delays of
0.02-0.2 s, some calls answer in time and some time out after Redis has run them,
which is what a burst does to a loaded Redis. With `stall_s`, every `stall_every_s`
the proxy also stalls: no reply at all leaves it for `stall_s` (a Redis busy with a
slow command or a fork), then everything held is sent.
"""

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class SlowRedisProxy:
    def __init__(
        self,
        upstream_host: str = "127.0.0.1",
        upstream_port: int = 6379,
        *,
        delay_s: tuple[float, float] = (0.02, 0.2),
        seed: int = 0,
        stall_every_s: float = 1.0,
        stall_s: float = 0.0,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.delay_s = delay_s
        self.random = random.Random(seed)
        self.stall_every_s = stall_every_s
        self.stall_s = stall_s
        self.port = 0
        self.replies_delayed = 0
        self.replies_stalled = 0
        self._started = time.monotonic()

    def _stall_left(self) -> float:
        """Seconds until the current stall ends (0 outside a stall)."""
        if self.stall_s <= 0:
            return 0.0
        phase = (time.monotonic() - self._started) % self.stall_every_s
        return max(self.stall_s - phase, 0.0)

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, delayed: bool
    ) -> None:
        try:
            while chunk := await reader.read(65536):
                if delayed:
                    self.replies_delayed += 1
                    await asyncio.sleep(self.random.uniform(*self.delay_s))
                    if (stall := self._stall_left()) > 0:
                        self.replies_stalled += 1
                        await asyncio.sleep(stall)
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(RuntimeError):
                writer.close()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            redis_r, redis_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.close()
            return
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(
                self._pipe(client_r, redis_w, delayed=False),
                self._pipe(redis_r, client_w, delayed=True),
            )

    @contextmanager
    def running(self) -> Iterator[str]:
        """Serve on a free loopback port in a thread; yield the proxy's redis:// URL."""
        loop = asyncio.new_event_loop()
        started = threading.Event()
        server: list[asyncio.Server] = []

        async def start() -> None:
            self._started = time.monotonic()
            srv = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = srv.sockets[0].getsockname()[1]
            server.append(srv)
            started.set()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(start())
            loop.run_forever()

        thread = threading.Thread(target=run, name="slow-redis", daemon=True)
        thread.start()
        if not started.wait(10):
            raise RuntimeError("the slow Redis proxy did not start")
        try:
            yield f"redis://127.0.0.1:{self.port}/0"
        finally:

            async def shutdown() -> None:
                server[0].close()
                tasks = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=5)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()
