"""Capacity figures for docs/scaling.md: the control plane's rates on PostgreSQL.

    python -m bench.capacity [--segments 1000] [--batches 300] [--records 100] [--tasks 200]

On a PostgreSQL database made for the run (dropped at the end) and a RabbitMQ
vhost made for the run, with one real `specroute control serve` process and one
real `specroute worker --pool solo`:

- snapshot: `--segments` segments, each with a rollout in canary, then the
  compiled snapshot's size (bytes, gzip bytes) and the time of its first GET
  (which compiles it) and of a second (cached);
- telemetry: `--batches` telemetry batches of 2 windows and `--records`
  per-request records each, POSTed by 4 client threads as gateways do; batches/s,
  records/s, control's CPU seconds per batch;
- celery: `--tasks` guard jobs (`guard_rollout`, one rollout each: evidence from
  the telemetry tables, pool health, verdict) sent at once to one worker process;
  tasks/s; then one guard sweep (`run_guards`) over every rollout, timed.

Prints one line per figure; `--json` writes them.
"""

import argparse
import gzip
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psutil
import psycopg

from bench.provision import post_json, register_tiny_pair
from demo.processes import ProcessStack, wait_http_ok
from engine.pools.local import tiny_pair_dir
from specwire import Arm, TelemetryBatch
from specwire.requests import RequestRecordDoc
from specwire.telemetry import TelemetryWindow

PG = os.environ.get("SPECROUTE_FLEET_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def specroute() -> list[str]:
    exe = Path(sys.executable).parent / "specroute"
    return (
        [str(exe)]
        if exe.is_file()
        else [sys.executable, "-c", "from control.cli import app; app()"]
    )


def provision(admin: httpx.Client, segments: int) -> list[int]:
    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        return post_json(admin, path, body)

    pair_dir = tiny_pair_dir()
    version = register_tiny_pair(admin, pair_dir)
    target = str(pair_dir / "target")
    spec = post(
        "/pools",
        {"name": "spec", "served_model_name": "m", "target_ref": target,
         "pair_version_id": version["id"]},
    )  # fmt: skip
    base = post("/pools", {"name": "base", "served_model_name": "m", "target_ref": target})
    thresholds = post(
        "/threshold-sets",
        {
            "name": "t",
            "min_acceptance_rate": 0.3,
            "min_mean_acceptance_length": 1.5,
            "min_speedup": 1.0,
            "max_kv_cache_usage": 0.9,
            "min_samples": 100,
            "stage_dwell_seconds": 600,
            "guard_dwell_seconds": 600,
            "probation_percentage": 2.0,
            "cooldown_seconds": 600,
        },
    )
    rollouts = []
    for i in range(segments):
        segment = post(
            "/segments", {"name": f"s{i}", "priority": i, "selector": {"tenants": [f"t{i}"]}}
        )
        rollout = post(
            "/rollouts",
            {
                "name": f"r{i}",
                "segment_id": segment["id"],
                "pair_version_id": version["id"],
                "spec_pool_id": spec["id"],
                "baseline_pool_id": base["id"],
                "threshold_set_id": thresholds["id"],
                "stages": [5, 25, 50, 100],
            },
        )
        post(
            f"/rollouts/{rollout['id']}/start",
            {"waive": ["offline_evaluation", "shadow"], "reason": "capacity run"},
        )
        rollouts.append(int(rollout["id"]))
    return rollouts


def measure_snapshot(url: str, internal: str, segments: int) -> dict[str, float]:
    headers = {"Authorization": f"Bearer {internal}"}
    started = time.perf_counter()
    first = httpx.get(url + "/internal/v1/snapshot", headers=headers, timeout=120)
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    httpx.get(url + "/internal/v1/snapshot", headers=headers, timeout=120)
    cached_s = time.perf_counter() - started
    first.raise_for_status()
    size = len(first.content)
    return {
        "segments": segments,
        "snapshot_bytes": size,
        "snapshot_gzip_bytes": len(gzip.compress(first.content)),
        "bytes_per_1000_segments": size * 1000 / segments,
        "first_get_s": first_s,
        "cached_get_s": cached_s,
    }


def batch(gateway: str, start: datetime, records: int) -> bytes:
    windows = [
        TelemetryWindow(segment_id=None, arm=arm, window_start=start, window_seconds=10,
                        requests=records // 2, completion_tokens=16 * records // 2)
        for arm in (Arm.BASELINE, Arm.SPEC)
    ]  # fmt: skip
    docs = [
        RequestRecordDoc(
            request_id=secrets.token_hex(16),
            received_at=start,
            tenant_id=1,
            tenant="apps",
            endpoint="chat",
            stream=True,
            model="m",
            arm=Arm.BASELINE,
            reason="cohort_baseline",
            prompt_tokens=12,
            completion_tokens=16,
            ttft_ms=7.0,
            tpot_ms=5.0,
            e2e_ms=90.0,
            outcome="ok",
            http_status=200,
        )
        for _ in range(records)
    ]
    doc = TelemetryBatch(gateway_id=gateway, window_start=start, windows=windows, requests=docs)
    return doc.model_dump_json().encode()


def measure_telemetry(
    url: str, internal: str, control_pid: int, batches: int, records: int, threads: int = 4
) -> dict[str, float]:
    headers = {"Authorization": f"Bearer {internal}", "content-type": "application/json"}
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    bodies = [batch(f"gw-{i % 8}", t0 + timedelta(seconds=10 * i), records) for i in range(batches)]
    cursor = iter(range(batches))
    lock = threading.Lock()
    failures: list[int] = []

    def worker() -> None:
        with httpx.Client(timeout=60) as http:
            while True:
                with lock:
                    i = next(cursor, None)
                if i is None:
                    return
                response = http.post(url + "/internal/v1/telemetry", content=bodies[i],
                                     headers=headers)  # fmt: skip
                if response.status_code != 200:
                    failures.append(response.status_code)

    proc = psutil.Process(control_pid)
    cpu0 = sum(proc.cpu_times()[:2])
    started = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - started
    cpu = sum(proc.cpu_times()[:2]) - cpu0
    assert not failures, f"telemetry POSTs failed: {failures[:5]}"
    return {
        "batches": batches,
        "records_per_batch": records,
        "batches_per_s": batches / wall,
        "records_per_s": batches * records / wall,
        "control_cpu_ms_per_batch": cpu * 1000 / batches,
        "body_kib_per_batch": len(bodies[0]) / 1024,
    }


def measure_celery(env: dict[str, str], rollouts: list[int], tasks: int) -> dict[str, float]:
    from control.automation.app import create_celery_app
    from control.automation.tasks import task_name
    from control.settings import ControlSettings

    settings = ControlSettings(
        database_url=env["SPECROUTE_DATABASE_URL"],
        broker_url=env["SPECROUTE_BROKER_URL"],
        result_backend=env["SPECROUTE_RESULT_BACKEND"],
        data_dir=Path(env["SPECROUTE_DATA_DIR"]),
    )
    app = create_celery_app(settings)
    app.send_task(task_name("guard_rollout"), args=[rollouts[0]]).get(timeout=120)  # warm
    started = time.perf_counter()
    results = [
        app.send_task(task_name("guard_rollout"), args=[rollouts[i % len(rollouts)]])
        for i in range(tasks)
    ]
    for r in results:
        r.get(timeout=300)
    wall = time.perf_counter() - started
    started = time.perf_counter()
    swept = app.send_task(task_name("run_guards")).get(timeout=600)
    sweep_s = time.perf_counter() - started
    return {
        "guard_tasks": tasks,
        "guard_tasks_per_s": tasks / wall,
        "sweep_rollouts": len(swept),
        "sweep_s": sweep_s,
        "sweep_ms_per_rollout": sweep_s * 1000 / max(len(swept), 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--segments", type=int, default=1000)
    p.add_argument("--batches", type=int, default=300)
    p.add_argument("--records", type=int, default=100)
    p.add_argument("--tasks", type=int, default=200)
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    from control.migrate import upgrade

    work = Path(tempfile.mkdtemp(prefix="specroute-capacity-"))
    name = f"capacity_{secrets.token_hex(4)}"
    vhost = f"capacity-{secrets.token_hex(3)}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    db_url = f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    has_ctl = shutil.which("rabbitmqctl") is not None
    if has_ctl:
        subprocess.run(["rabbitmqctl", "-q", "add_vhost", vhost], check=True, capture_output=True)
        subprocess.run(["rabbitmqctl", "-q", "set_permissions", "-p", vhost, "guest", ".*", ".*",
                        ".*"], check=True, capture_output=True)  # fmt: skip
    stack = ProcessStack(work / "logs", grace_s=5)
    admin_token, internal = secrets.token_hex(8), secrets.token_hex(8)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECROUTE_")} | {
        "SPECROUTE_DATA_DIR": str(work),
        "SPECROUTE_DATABASE_URL": db_url,
        "SPECROUTE_ADMIN_TOKEN": admin_token,
        "SPECROUTE_INTERNAL_TOKEN": internal,
        "SPECROUTE_BROKER_URL": f"amqp://guest:guest@127.0.0.1:5672/{vhost if has_ctl else ''}",
        "SPECROUTE_RESULT_BACKEND": "db+" + db_url,
        "SPECROUTE_MODEL_ROOTS": f'["{tiny_pair_dir()}"]',
    }
    figures: dict[str, Any] = {"load_average_start": os.getloadavg()}
    try:
        upgrade(db_url)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        control = stack.start(
            "control",
            [*specroute(), "control", "serve", "--port", str(port), "--no-migrate",
             "--log-level", "warning"],
            env,
        )  # fmt: skip
        wait_http_ok(url + "/healthz", control, 60)
        with httpx.Client(
            base_url=url + "/admin/v1", headers={"Authorization": f"Bearer {admin_token}"},
            timeout=30,
        ) as admin:  # fmt: skip
            started = time.perf_counter()
            rollouts = provision(admin, a.segments)
            figures["provision_s"] = time.perf_counter() - started
        figures["snapshot"] = measure_snapshot(url, internal, a.segments)
        print("snapshot", json.dumps(figures["snapshot"]), flush=True)
        figures["telemetry_records"] = measure_telemetry(
            url, internal, control.pid, a.batches, a.records
        )
        print("telemetry", json.dumps(figures["telemetry_records"]), flush=True)
        figures["telemetry_windows_only"] = measure_telemetry(
            url, internal, control.pid, a.batches, 0
        )
        print("telemetry (no records)", json.dumps(figures["telemetry_windows_only"]), flush=True)
        stack.start(
            "worker", [*specroute(), "worker", "--pool", "solo", "--loglevel", "WARNING"], env
        )
        figures["celery"] = measure_celery(env, rollouts, a.tasks)
        print("celery", json.dumps(figures["celery"]), flush=True)
    finally:
        stack.stop()
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if has_ctl:
            subprocess.run(["rabbitmqctl", "-q", "delete_vhost", vhost], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    figures["load_average_end"] = os.getloadavg()
    print("load average", figures["load_average_start"], "->", figures["load_average_end"])
    if a.json:
        a.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
