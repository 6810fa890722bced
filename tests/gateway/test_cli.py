"""`specroute gateway serve` starts a real server configured only by environment."""

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.fixtures.ready import wait_ready
from tests.gateway.policy import TENANT_KEY, make_snapshot, write_snapshot
from tests.gateway.server import free_port


def test_serve_command_answers_ready_and_models(tmp_path: Path) -> None:
    path = write_snapshot(
        tmp_path / "s.json", make_snapshot(spec_urls=[], baseline_urls=[], version=3)
    )
    port = free_port()
    env = os.environ | {
        "SPECROUTE_GATEWAY_SNAPSHOT_FILE": str(path),
        "SPECROUTE_GATEWAY_GATEWAY_ID": "cli-test",
    }
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "specroute"),
            "gateway",
            "serve",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}/readyz"
        wait_ready(url, time.monotonic() + 30.0, proc=proc, what="gateway CLI")
        assert httpx.get(url).json()["snapshot_version"] == 3
        models = httpx.get(
            f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {TENANT_KEY}"}
        )
        assert [m["id"] for m in models.json()["data"]] == ["tiny"]
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_two_gateway_processes_on_one_host_report_under_different_ids() -> None:
    # Telemetry batches are idempotent per (gateway id, window): a shared default id
    # would make the control plane keep one of two processes' windows.
    env = {k: v for k, v in os.environ.items() if k != "SPECROUTE_GATEWAY_GATEWAY_ID"}
    code = "from gateway.settings import GatewaySettings; print(GatewaySettings().gateway_id)"
    ids = {
        subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    }
    assert len(ids) == 2
    assert all(i.startswith("gw-") for i in ids)
