"""Snapshot refresh: ETag/304 against a real HTTP peer, Redis change notifications, age."""

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI, Header, Response

from gateway.snapshot.poller import SnapshotPoller
from gateway.snapshot.store import SnapshotStore
from specwire import INTERNAL_PREFIX, SNAPSHOT_CHANNEL, PolicySnapshot, TenantSpec
from tests.fixtures.services import require_redis
from tests.gateway.policy import TENANT_KEY, key_hash, make_snapshot, write_snapshot
from tests.gateway.server import serve_app

TOKEN = "internal-test-token"


@dataclass
class SnapshotPeer:
    """A real HTTP server speaking control's snapshot contract (ETag, 304, bearer)."""

    snapshot: PolicySnapshot
    hits: dict[int, int] = field(default_factory=dict)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get(INTERNAL_PREFIX + "/snapshot")
        def snapshot(
            authorization: str = Header(default=""),
            if_none_match: str | None = Header(default=None),
        ) -> Response:
            if authorization != f"Bearer {TOKEN}":
                self.hits[401] = self.hits.get(401, 0) + 1
                return Response(status_code=401)
            etag = f'"{self.snapshot.version}"'
            if if_none_match == etag:
                self.hits[304] = self.hits.get(304, 0) + 1
                return Response(status_code=304, headers={"ETag": etag})
            self.hits[200] = self.hits.get(200, 0) + 1
            return Response(
                self.snapshot.model_dump_json(),
                media_type="application/json",
                headers={"ETag": etag},
            )

        return app


def _version(store: SnapshotStore) -> int | None:
    return store.snapshot.version if store.snapshot is not None else None


@pytest.fixture
def peer() -> Iterator[tuple[SnapshotPeer, str]]:
    p = SnapshotPeer(make_snapshot(spec_urls=[], baseline_urls=[], version=5))
    with serve_app(p.app()) as url:
        yield p, url


def _poller(
    store: SnapshotStore, client: httpx.AsyncClient, url: str, snapshot_file: Path | None = None
) -> SnapshotPoller:
    return SnapshotPoller(
        store,
        client=client,
        control_url=url,
        token=TOKEN,
        interval_s=0.05,
        snapshot_file=snapshot_file,
    )


async def test_etag_poll_then_304_confirms(peer: tuple[SnapshotPeer, str]) -> None:
    p, url = peer
    store = SnapshotStore()
    async with httpx.AsyncClient() as client:
        poller = _poller(store, client, url)
        assert await poller.poll_once() is True
        assert store.snapshot == p.snapshot and store.etag == '"5"'
        assert await poller.poll_once() is False
        assert await poller.poll_once() is False
    assert p.hits == {200: 1, 304: 2}
    assert store.age_s() < 1.0
    assert store.tenant_for_key(TENANT_KEY) is not None
    assert store.tenant_for_key("sk-nope") is None


async def test_refused_or_failed_polls_keep_the_last_snapshot(
    peer: tuple[SnapshotPeer, str],
) -> None:
    p, url = peer
    store = SnapshotStore()
    async with httpx.AsyncClient() as client:
        await _poller(store, client, url).poll_once()
        bad = SnapshotPoller(store, client=client, control_url=url, token="wrong", interval_s=1)
        assert await bad.poll_once() is False
        down = _poller(store, client, "http://127.0.0.1:1")
        assert await down.poll_once() is False
    assert p.hits[401] == 1
    assert store.snapshot is not None and store.snapshot.version == 5


def test_older_versions_are_never_installed() -> None:
    store = SnapshotStore()
    assert store.replace(
        make_snapshot(spec_urls=[], baseline_urls=[], version=9), etag=None, confirmed=True
    )
    assert not store.replace(
        make_snapshot(spec_urls=[], baseline_urls=[], version=8), etag=None, confirmed=True
    )
    assert store.snapshot is not None and store.snapshot.version == 9


def test_age_counts_from_confirmation_or_generation() -> None:
    store = SnapshotStore()
    assert store.age_s() == float("inf")
    old = datetime.now(UTC) - timedelta(seconds=100)
    store.replace(
        make_snapshot(spec_urls=[], baseline_urls=[], generated_at=old), etag=None, confirmed=False
    )
    assert 99.0 < store.age_s() < 102.0
    store.confirm()
    assert store.age_s() < 1.0


async def test_file_source_rereads_on_change(tmp_path: Path) -> None:
    path = write_snapshot(
        tmp_path / "s.json", make_snapshot(spec_urls=[], baseline_urls=[], version=1)
    )
    store = SnapshotStore()
    async with httpx.AsyncClient() as client:
        poller = _poller(store, client, "http://unused", snapshot_file=path)
        assert await poller.poll_once() is True
        assert await poller.poll_once() is False
        write_snapshot(path, make_snapshot(spec_urls=[], baseline_urls=[], version=2))
        assert await poller.poll_once() is True
        path.write_text("{broken")
        assert await poller.poll_once() is False
    assert store.snapshot is not None and store.snapshot.version == 2


@pytest.mark.redis
async def test_redis_notification_flips_within_2s_p99(peer: tuple[SnapshotPeer, str]) -> None:
    import redis.asyncio as aioredis

    redis_url = require_redis()
    p, url = peer
    store = SnapshotStore()
    publisher = aioredis.Redis.from_url(redis_url)
    async with httpx.AsyncClient() as client:
        # A 60 s poll interval: only the notification can make a flip arrive quickly.
        poller = SnapshotPoller(
            store, client=client, control_url=url, token=TOKEN, interval_s=60.0, redis_url=redis_url
        )
        task = asyncio.create_task(poller.run())
        try:
            while store.snapshot is None or poller.polls < 1:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3)  # let the subscription settle
            latencies = []
            for version in range(6, 26):
                p.snapshot = make_snapshot(spec_urls=[], baseline_urls=[], version=version)
                started = time.monotonic()
                await publisher.publish(SNAPSHOT_CHANNEL, str(version))
                while _version(store) != version:
                    assert time.monotonic() - started < 5.0, "flip never arrived"
                    await asyncio.sleep(0.002)
                latencies.append(time.monotonic() - started)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await publisher.aclose()
    latencies.sort()
    print(f"notification flip latency p50={latencies[10]:.4f}s max={latencies[-1]:.4f}s")
    assert latencies[-1] < 2.0, latencies
    assert poller.notifications >= 20


def test_key_lookup_finds_each_of_many_tenants_and_only_them() -> None:
    base = make_snapshot(spec_urls=[], baseline_urls=[])
    tenants = [
        TenantSpec(id=i, name=f"t{i}", key_hashes=[key_hash(f"sk-{i}").upper()])
        for i in range(1, 5001)
    ]
    # A hash listed by two tenants belongs to the first that lists it.
    tenants.append(TenantSpec(id=9999, name="late", key_hashes=[key_hash("sk-7")]))
    store = SnapshotStore()
    store.replace(base.model_copy(update={"tenants": tenants}), etag=None, confirmed=True)
    found = [store.tenant_for_key(f"sk-{i}") for i in (1, 7, 2500, 5000)]
    assert [t.name if t else None for t in found] == ["t1", "t7", "t2500", "t5000"]
    assert store.tenant_for_key("sk-5001") is None
    assert store.tenant_for_key(key_hash("sk-1")) is None  # the hash itself is not a key
