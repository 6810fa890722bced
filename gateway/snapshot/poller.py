"""Keeps the SnapshotStore fresh: ETag polls of control, or a static file.

With a Redis URL, a message on SNAPSHOT_CHANNEL wakes the poller at once, so a
flip reaches the gateway in one round trip instead of up to one poll interval.
"""

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from pydantic import ValidationError

from gateway.snapshot.store import SnapshotStore
from specwire import INTERNAL_PREFIX, SNAPSHOT_CHANNEL, PolicySnapshot

log = logging.getLogger(__name__)

OnSnapshot = Callable[[SnapshotStore], None]


class SnapshotPoller:
    def __init__(
        self,
        store: SnapshotStore,
        *,
        client: httpx.AsyncClient,
        control_url: str,
        token: str,
        interval_s: float,
        snapshot_file: Path | None = None,
        redis_url: str | None = None,
        on_poll: OnSnapshot | None = None,
    ) -> None:
        self._store = store
        self._client = client
        self._url = control_url.rstrip("/") + INTERNAL_PREFIX + "/snapshot"
        self._token = token
        self._interval_s = interval_s
        self._file = snapshot_file
        self._file_mtime: float | None = None
        self._redis_url = redis_url
        self._on_poll = on_poll
        self._wake = asyncio.Event()
        self.polls = 0
        self.notifications = 0

    async def poll_once(self) -> bool:
        """One refresh; True when a new snapshot was installed. Never raises on I/O."""
        self.polls += 1
        try:
            changed = self._read_file() if self._file is not None else await self._fetch()
        except (httpx.HTTPError, OSError, ValidationError, ValueError) as exc:
            # NOTE: keep serving the last snapshot; its age decides when to fail safe.
            log.warning("snapshot refresh failed: %s", type(exc).__name__)
            changed = False
        if self._on_poll is not None:
            self._on_poll(self._store)
        return changed

    def _read_file(self) -> bool:
        assert self._file is not None
        mtime = self._file.stat().st_mtime
        if mtime == self._file_mtime:
            return False
        snapshot = PolicySnapshot.model_validate_json(self._file.read_bytes())
        self._file_mtime = mtime
        return self._store.replace(snapshot, etag=None, confirmed=False)

    async def _fetch(self) -> bool:
        headers = {"Authorization": f"Bearer {self._token}"}
        if self._store.etag is not None:
            headers["If-None-Match"] = self._store.etag
        resp = await self._client.get(self._url, headers=headers)
        if resp.status_code == 304:
            self._store.confirm()
            return False
        resp.raise_for_status()
        snapshot = PolicySnapshot.model_validate_json(resp.content)
        return self._store.replace(snapshot, etag=resp.headers.get("etag"), confirmed=True)

    def notify(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        listener = asyncio.create_task(self._listen()) if self._redis_url else None
        try:
            while True:
                started = time.monotonic()
                await self.poll_once()
                remaining = self._interval_s - (time.monotonic() - started)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=max(0.0, remaining))
                self._wake.clear()
        finally:
            if listener is not None:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listener

    async def _listen(self) -> None:
        import redis.asyncio as aioredis

        assert self._redis_url is not None
        backoff = 0.5
        while True:
            client = aioredis.Redis.from_url(self._redis_url)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.subscribe(SNAPSHOT_CHANNEL)
                    backoff = 0.5
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            self.notifications += 1
                            self._wake.set()
            except (OSError, aioredis.RedisError) as exc:
                log.warning("snapshot notifications unavailable: %s", type(exc).__name__)
            finally:
                await client.aclose()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)
