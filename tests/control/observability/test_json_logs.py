"""`specroute control serve` with SPECROUTE_LOG_FORMAT=json: every line it writes
is one JSON object, start-up warnings included, and a request's lines carry its id."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.fixtures.ready import wait_ready
from tests.gateway.server import free_port

SPECROUTE = str(Path(sys.executable).parent / "specroute")


def test_control_serve_writes_json_lines_with_request_ids(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECROUTE_")}
    env |= {
        "SPECROUTE_LOG_FORMAT": "json",
        "SPECROUTE_DATA_DIR": str(tmp_path),
        "SPECROUTE_INTERNAL_TOKEN": "json-internal",
    }
    # --dev with the admin token unset: the app logs its DEV TOKENS warning at build time.
    proc = subprocess.Popen(
        [SPECROUTE, "control", "serve", "--port", str(port), "--dev"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(
            f"{base}/readyz", time.monotonic() + 60.0, proc=proc, what="control", interval=0.2
        )
        pairs = httpx.get(
            f"{base}/admin/v1/pairs",
            headers={"Authorization": "Bearer specroute-admin-dev", "x-request-id": "op-99"},
        )
        assert pairs.status_code == 200 and pairs.headers["x-request-id"] == "op-99"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    out = proc.stdout.read() if proc.stdout else ""
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    warning = [line for line in lines if line["logger"] == "specroute.control"]
    assert warning and warning[0]["level"] == "WARNING"
    assert "DEV TOKENS ON" in warning[0]["message"]
    access = [
        line
        for line in lines
        if line["logger"] == "uvicorn.access" and line["path"] == "/admin/v1/pairs"
    ]
    assert len(access) == 1
    assert access[0] | {"ts": None} == {
        "ts": None,
        "level": "INFO",
        "logger": "uvicorn.access",
        "message": "request",
        "method": "GET",
        "path": "/admin/v1/pairs",
        "status": 200,
        "client": access[0]["client"],
        "request_id": "op-99",
    }
