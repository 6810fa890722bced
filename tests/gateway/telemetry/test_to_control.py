"""The flusher against the real control plane: real app over HTTP, real database rows.

Runs on SQLite and PostgreSQL (the `db_url` fixture); the app commits for real,
so `committed_database` empties the tables afterwards.
"""

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest_asyncio
import uvicorn
from sqlalchemy import func, select

from control.db import Database
from control.models import TelemetryWindowRow
from control.settings import ControlSettings
from control.telemetry.service import list_windows
from gateway.metrics import GatewayMetrics
from gateway.telemetry import RequestRecord, TelemetryAggregator, TelemetryFlusher
from specwire import LATENCY_BUCKETS_MS, Arm
from tests.fixtures.db import ADMIN_TOKEN, INTERNAL_TOKEN
from tests.gateway.records import NO_SPEC_WORK, make_record

T0 = 1_700_000_000.0


def rec(finished_at: float, **kw: object) -> RequestRecord:
    defaults = {"segment_id": 4, "pair_version_id": 9, "rollout_id": None}
    return make_record(finished_at=finished_at, **{**defaults, **kw})


@pytest_asyncio.fixture(loop_scope="function")
async def control_url(committed_database: Database, tmp_path: Path) -> AsyncIterator[str]:
    from control.app import create_app

    settings = ControlSettings(
        data_dir=tmp_path,
        database_url=committed_database.url,
        admin_token=ADMIN_TOKEN,
        internal_token=INTERNAL_TOKEN,
    )
    app = create_app(settings, database=committed_database)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    server.should_exit = True
    await task


async def test_flushed_windows_become_control_rows_once(
    control_url: str, committed_database: Database
) -> None:
    agg = TelemetryAggregator("gw-it", window_seconds=10, max_pending_windows=16)
    metrics = GatewayMetrics(top_k_segments=4)
    for i in range(3):
        agg.record(rec(T0 + 1 + i))
    agg.record(rec(T0 + 2, arm=Arm.BASELINE, pair_version_id=None, e2e_ms=0.05, **NO_SPEC_WORK))
    agg.record(rec(T0 + 12, outcome="error", http_status=502))
    async with httpx.AsyncClient() as client:
        flusher = TelemetryFlusher(agg, client, control_url, INTERNAL_TOKEN, 0.05, metrics=metrics)
        assert flusher.collect(T0 + 20) == 2
        assert await flusher.send_pending() is True
        assert flusher.flushed == 2 and flusher.dropped["rejected"] == 0

        # A resend of the same (gateway, window start), e.g. after a lost ack, is a no-op.
        agg2 = TelemetryAggregator("gw-it", window_seconds=10, max_pending_windows=16)
        agg2.record(rec(T0 + 3))
        again = TelemetryFlusher(agg2, client, control_url, INTERNAL_TOKEN, 0.05)
        again.collect(T0 + 10)
        assert await again.send_pending() is True

    with committed_database.session() as s:
        assert s.scalar(select(func.count()).select_from(TelemetryWindowRow)) == 3
        windows = list_windows(
            s, start=datetime.fromtimestamp(T0, UTC), end=datetime.fromtimestamp(T0 + 20, UTC)
        )
    by_key = {(w.window_start.timestamp(), w.arm, w.pair_version_id): w for w in windows}
    spec = by_key[(T0, Arm.SPEC, 9)]
    assert (spec.segment_id, spec.requests, spec.completion_tokens) == (4, 3, 60)
    assert (spec.drafts, spec.drafted_tokens, spec.accepted_tokens) == (24, 72, 36)
    assert spec.accepted_per_position == [18, 12, 6]
    assert spec.e2e.total == 3 and spec.e2e.sum_ms == 435.0
    base = by_key[(T0, Arm.BASELINE, None)]
    assert base.requests == 1 and base.e2e.counts[0] == 1  # 0.05 ms <= first edge
    assert LATENCY_BUCKETS_MS[0] == 0.1
    later = by_key[(T0 + 10, Arm.SPEC, 9)]
    assert (later.requests, later.errors) == (1, 1)


async def test_a_wrong_token_is_kept_for_retry_not_dropped(control_url: str) -> None:
    agg = TelemetryAggregator("gw-it", window_seconds=10, max_pending_windows=16)
    agg.record(rec(T0 + 1))
    async with httpx.AsyncClient() as client:
        flusher = TelemetryFlusher(agg, client, control_url, "not-the-token", 0.05)
        flusher.collect(T0 + 10)
        assert await flusher.send_pending() is False
    assert flusher.pending == 1 and flusher.dropped["rejected"] == 0
