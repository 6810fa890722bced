"""Quotas while Redis is down or hung: the failure mode is a setting (local by default,
open, closed), every Redis call is bounded in time, a failure is counted, and the
gateway does not retry Redis on every request meanwhile."""

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway.quota import make_quota_limiter
from gateway.quota.guarded import GuardedQuotaLimiter, QuotaStoreUnavailable
from specwire import QuotaSpec, TenantSpec
from tests.gateway.policy import TENANT_KEY, make_snapshot
from tests.gateway.server import run_gateway, serve_app


def tenant(limit: int) -> TenantSpec:
    return TenantSpec(
        id=1, name="t1", key_hashes=[], quota=QuotaSpec(weighted_tokens_per_minute=limit)
    )


@pytest.fixture
def hung_redis() -> Iterator[str]:
    """A TCP peer that accepts connections and never answers: a hung Redis."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"redis://127.0.0.1:{server.getsockname()[1]}/0"
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in held:
            conn.close()
        server.close()


def _guarded(url: str, mode: str, failures: list[str]) -> GuardedQuotaLimiter:
    limiter = make_quota_limiter(
        url,
        failure_mode=mode,  # type: ignore[arg-type]
        timeout_s=0.1,
        retry_s=30.0,
        on_failure=failures.append,
    )
    assert isinstance(limiter, GuardedQuotaLimiter)
    return limiter


async def test_a_hung_redis_costs_one_bounded_wait_then_none(hung_redis: str) -> None:
    failures: list[str] = []
    limiter = _guarded(hung_redis, "local", failures)
    t = tenant(100)
    started = time.monotonic()
    first = await limiter.admit(t, reserve=40.0)
    first_wait = time.monotonic() - started
    assert first.allowed and first.reservation is not None
    assert first.reservation.origin == "local"
    assert 0.09 <= first_wait < 0.5  # the timeout, not Redis' 1 s socket timeout
    started = time.monotonic()
    for _ in range(20):
        await limiter.admit(t, reserve=1.0)
    assert time.monotonic() - started < 0.05  # Redis is not retried within retry_s
    assert failures == ["admit"]


async def test_local_mode_enforces_the_budget_per_replica(hung_redis: str) -> None:
    failures: list[str] = []
    limiter = _guarded(hung_redis, "local", failures)
    t = tenant(100)
    verdicts = [await limiter.admit(t, reserve=30.0) for _ in range(6)]
    assert [v.allowed for v in verdicts] == [True, True, True, True, False, False]
    # Settling a local reservation refunds it locally: room for one more.
    reservation = verdicts[0].reservation
    assert reservation is not None
    await limiter.settle(reservation, 0.0)
    assert (await limiter.admit(t, reserve=30.0)).allowed


async def test_open_and_closed_modes(hung_redis: str) -> None:
    t = tenant(10)
    opened = _guarded(hung_redis, "open", [])
    assert all([(await opened.admit(t, reserve=100.0)).allowed for _ in range(5)])
    closed = _guarded(hung_redis, "closed", [])
    with pytest.raises(QuotaStoreUnavailable) as refused:
        await closed.admit(t, reserve=1.0)
    assert refused.value.retry_after_s >= 1.0


def _chat() -> dict[str, object]:
    return {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@pytest.mark.parametrize("mode", ["closed", "local"])
def test_the_gateway_with_redis_down(tmp_path: Path, hung_redis: str, mode: str) -> None:
    from engine.fake import FakeUpstream

    with serve_app(FakeUpstream(4, 0.001, model="tiny")) as engine:
        snapshot = make_snapshot(spec_urls=[engine], baseline_urls=[engine])
        snapshot.tenants[0].quota = QuotaSpec(weighted_tokens_per_minute=60)
        settings = {
            "redis_url": hung_redis,
            "quota_redis_failure": mode,
            "quota_redis_timeout_s": 0.1,
        }
        with run_gateway(tmp_path, snapshot, **settings) as gw:
            auth = {"Authorization": f"Bearer {TENANT_KEY}"}
            url = f"{gw.base_url}/v1/chat/completions"
            statuses = [httpx.post(url, json=_chat(), headers=auth).status_code for _ in range(6)]
            metrics = httpx.get(f"{gw.base_url}/metrics").text
    failures = [
        line
        for line in metrics.splitlines()
        if line.startswith('specroute_gateway_quota_store_failures_total{operation="admit"}')
    ]
    assert failures and float(failures[0].split()[-1]) >= 1.0
    if mode == "closed":
        assert statuses == [503] * 6
    else:
        # Enforced per replica: 60 tokens/min, each request reserves ~4 + ~20 tokens.
        assert statuses[0] == 200 and 429 in statuses
