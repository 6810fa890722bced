"""`specroute gateway serve --workers 2`: two real gateway processes on one port, a real
control plane storing their telemetry, a real (fake, fixed-pace) engine.

One /metrics scrape, whichever process answers it, counts every request of both;
the telemetry windows control stores count each request once, under one gateway id
per process. `--workers 2` without a shared quota store refuses to start.
"""

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select

from control.db import Database
from control.models import TelemetryBatchRow, TelemetryWindowRow
from control.settings import ControlSettings
from engine.fake import FakeUpstream
from gateway.metric_files import forget_dead_processes
from tests.fixtures.db import ADMIN_TOKEN, INTERNAL_TOKEN
from tests.fixtures.ready import wait_ready
from tests.fixtures.services import REDIS_URL, require_redis
from tests.gateway.policy import TENANT_KEY, make_snapshot, write_snapshot
from tests.gateway.server import free_port, serve_app
from tests.hostile.quota_fleet import burst, fake_engine, fleet_snapshot, new_tenant

SPECROUTE = str(Path(sys.executable).parent / "specroute")
AUTH = {"Authorization": f"Bearer {TENANT_KEY}"}
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True}
N = 48
BUDGET = 2000  # weighted tokens/min: 100 requests of 20 completion tokens


@pytest.fixture
def control_url(committed_database: Database, tmp_path: Path) -> Iterator[str]:
    """The real control plane, served from a thread (the test itself is synchronous)."""
    from control.app import create_app

    settings = ControlSettings(
        data_dir=tmp_path,
        database_url=committed_database.url,
        admin_token=ADMIN_TOKEN,
        internal_token=INTERNAL_TOKEN,
    )
    with serve_app(create_app(settings, database=committed_database)) as url:
        yield url


@contextmanager
def gateway_workers(
    tmp_path: Path, engine_url: str, control_url: str, metrics_dir: Path
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    snapshot = write_snapshot(
        tmp_path / "s.json",
        make_snapshot(spec_urls=[], baseline_urls=[engine_url], with_rollout=False),
    )
    port = free_port()
    env = os.environ | {
        "SPECROUTE_GATEWAY_SNAPSHOT_FILE": str(snapshot),
        "SPECROUTE_GATEWAY_TELEMETRY_ENABLED": "true",
        "SPECROUTE_GATEWAY_CONTROL_URL": control_url,
        "SPECROUTE_GATEWAY_INTERNAL_TOKEN": INTERNAL_TOKEN,
        "SPECROUTE_GATEWAY_TELEMETRY_WINDOW_S": "1",
        "SPECROUTE_GATEWAY_TELEMETRY_FLUSH_S": "0.2",
        "SPECROUTE_GATEWAY_GATEWAY_ID": "gw-test",
        "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
    }
    env.pop("SPECROUTE_GATEWAY_REDIS_URL", None)
    proc = subprocess.Popen(
        [SPECROUTE, "gateway", "serve", "--port", str(port), "--workers", "2", "--local-quotas"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60.0
        while len(list(metrics_dir.glob("counter_*.db"))) < 2:  # both workers built their app
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the gateway workers did not come up"
            time.sleep(0.1)
        wait_ready(f"{url}/readyz", deadline, proc=proc, what="gateway")
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def stream_one(url: str) -> int:
    # A new connection per request, so the two processes share the requests.
    with (
        httpx.Client(timeout=10.0) as client,
        client.stream("POST", url + "/v1/chat/completions", json=CHAT, headers=AUTH) as r,
    ):
        body = b"".join(r.iter_bytes())
    assert body.endswith(b"data: [DONE]\n\n")
    return r.status_code


def in_scrape(url: str, family: str = "specroute_gateway_requests") -> float:
    text = httpx.get(url + "/metrics", timeout=5.0).text
    return sum(
        s.value
        for fam in text_string_to_metric_families(text)
        if fam.name == family
        for s in fam.samples
        if s.name == family + "_total"
    )


def refuse_one(url: str) -> int:
    # A new connection per request, so the two processes share the refusals.
    with httpx.Client(timeout=10.0) as client:
        r = client.post(url + "/v1/chat/completions", content=b"{", headers=AUTH)
    assert r.json()["error"]["code"] == "invalid_json"
    return r.status_code


def stored(db: Database) -> tuple[int, set[str]]:
    with db.session() as s:
        total = s.scalar(select(func.coalesce(func.sum(TelemetryWindowRow.requests), 0)))
        ids = set(s.scalars(select(TelemetryBatchRow.gateway_id)))
    return int(total or 0), ids


def test_two_processes_one_scrape_counts_every_request_and_telemetry_counts_once(
    tmp_path: Path, control_url: str, committed_database: Database
) -> None:
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    # Left by an earlier run: not prometheus-client data, so a scrape that read it
    # would fail; the start empties the directory of such files (and only of those).
    (metrics_dir / "counter_4242.db").write_bytes(b"not a metrics file")
    (metrics_dir / "notes.txt").write_text("kept")
    engine = FakeUpstream(tokens=8, interval_s=0.004, model="tiny")
    with serve_app(engine) as engine_url:
        with gateway_workers(tmp_path, engine_url, control_url, metrics_dir) as (url, proc):
            assert not (metrics_dir / "counter_4242.db").exists()
            assert (metrics_dir / "notes.txt").read_text() == "kept"
            with ThreadPoolExecutor(8) as pool:
                statuses = list(pool.map(stream_one, [url] * N))
            assert statuses == [200] * N
            # Every scrape, whichever process answers it, counts both processes' requests.
            assert [in_scrape(url) for _ in range(6)] == [float(N)] * 6
            # Refusals too, and only the refusals: no served request counts as one.
            with ThreadPoolExecutor(8) as pool:
                assert list(pool.map(refuse_one, [url] * 12)) == [400] * 12
            refused = [in_scrape(url, "specroute_gateway_refusals") for _ in range(6)]
            assert refused == [12.0] * 6
            deadline = time.monotonic() + 15.0
            while stored(committed_database)[0] < N and time.monotonic() < deadline:
                time.sleep(0.2)
            total, ids = stored(committed_database)
            assert total == N
            workers = {p.pid for p in _workers(proc.pid)}
            assert ids == {f"gw-test-{pid}" for pid in workers}  # one id per process
            assert len(workers) == 2
        # After both processes flushed everything at shutdown: still each request once.
        assert proc.returncode is not None
        assert stored(committed_database) == (N, ids)


def _workers(pid: int) -> list[psutil.Process]:
    """uvicorn's worker processes (spawned; not multiprocessing's resource tracker)."""
    return [p for p in psutil.Process(pid).children() if "spawn_main" in " ".join(p.cmdline())]


def test_several_workers_without_a_shared_quota_store_refuse_to_start(tmp_path: Path) -> None:
    snapshot = write_snapshot(
        tmp_path / "s.json", make_snapshot(spec_urls=[], baseline_urls=["http://127.0.0.1:9"])
    )
    env = os.environ | {"SPECROUTE_GATEWAY_SNAPSHOT_FILE": str(snapshot)}
    env.pop("SPECROUTE_GATEWAY_REDIS_URL", None)
    done = subprocess.run(
        [SPECROUTE, "gateway", "serve", "--port", str(free_port()), "--workers", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--workers 2 without SPECROUTE_GATEWAY_REDIS_URL" in done.stderr


def test_a_dead_workers_live_gauges_leave_the_sums_and_its_counters_stay(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    me = os.getpid()
    for name in (
        f"gauge_livesum_{dead.pid}.db",
        f"counter_{dead.pid}.db",
        f"gauge_livesum_{me}.db",
    ):
        (tmp_path / name).write_bytes(b"")
    assert forget_dead_processes(tmp_path) == [dead.pid]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"counter_{dead.pid}.db", f"gauge_livesum_{me}.db"]
    )


@pytest.mark.redis
def test_two_processes_share_a_tenants_budget_through_redis(tmp_path: Path) -> None:
    require_redis()
    tenant = new_tenant()
    metrics_dir = tmp_path / "metrics"
    with fake_engine() as engine_url:
        snapshot = tmp_path / "snapshot.json"
        snapshot.write_text(fleet_snapshot(engine_url, [tenant], BUDGET).model_dump_json())
        env = os.environ | {
            "SPECROUTE_GATEWAY_SNAPSHOT_FILE": str(snapshot),
            "SPECROUTE_GATEWAY_REDIS_URL": REDIS_URL,
            # Redis is healthy here; on a busy machine its answers can take more than
            # the default 0.1 s, which would put a process in its local fallback (a
            # different bound, tested in test_quota_fleet.py).
            "SPECROUTE_GATEWAY_QUOTA_REDIS_TIMEOUT_S": "5",
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        }
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            [SPECROUTE, "gateway", "serve", "--port", str(port), "--workers", "2"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60.0
            while len(list(metrics_dir.glob("counter_*.db"))) < 2:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
            wait_ready(f"{url}/readyz", deadline, proc=proc, what="gateway")
            # 300 requests of 20 tokens on many connections, against 100 requests' budget.
            result = asyncio.run(burst([url], tenant, requests=300, budget=BUDGET))
            text = httpx.get(url + "/metrics", timeout=5.0).text
            per_process = [
                # prometheus_client's merge is unannotated.
                _requests_in(MultiProcessCollector.merge([str(f)], accumulate=False))  # type: ignore[no-untyped-call]
                for f in sorted(metrics_dir.glob("counter_*.db"))
            ]
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    assert result.other == {}, result
    assert result.store_failures == 0, result
    assert result.ok + result.refused == 300
    # One budget for both processes, as for replicas: not one each.
    assert result.admitted_tokens == BUDGET, result
    assert all(n > 0 for n in per_process) and sum(per_process) == 300, per_process
    statuses = {
        s.labels["status"]: s.value
        for family in text_string_to_metric_families(text)
        if family.name == "specroute_gateway_requests"
        for s in family.samples
        if s.name == "specroute_gateway_requests_total"
    }
    assert statuses == {"200": result.ok, "429": result.refused}


def _requests_in(families: Iterable[Metric]) -> float:
    return sum(
        s.value
        for family in families
        if family.name == "specroute_gateway_requests"
        for s in family.samples
        if s.name == "specroute_gateway_requests_total"
    )
