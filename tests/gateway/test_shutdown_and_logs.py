"""`specroute gateway serve` as a process: SIGTERM lets in-flight streams finish
within `shutdown_grace_s`, and `log_format=json` writes one JSON object per
line carrying the request id. A real gateway process streams from a real (fake,
fixed-pace) upstream server over loopback."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.fake import FakeUpstream
from tests.fixtures.keep_alive import assert_kept_and_closed
from tests.fixtures.ready import wait_ready
from tests.gateway.policy import TENANT_KEY, make_snapshot, write_snapshot
from tests.gateway.server import free_port, serve_app

SPECROUTE = str(Path(sys.executable).parent / "specroute")
# uvicorn re-raises the SIGTERM it caught once shutdown is complete (0.29+), so a
# clean, graceful exit reads as "terminated by SIGTERM".
EXITED_ON_SIGTERM = -signal.SIGTERM


@contextmanager
def gateway_process(tmp_path: Path, upstream: str, **env: str) -> Iterator[tuple[str, Any]]:
    path = write_snapshot(
        tmp_path / "s.json", make_snapshot(spec_urls=[], baseline_urls=[upstream], version=4)
    )
    port = free_port()
    proc = subprocess.Popen(
        [SPECROUTE, "gateway", "serve", "--port", str(port)],
        env=os.environ
        | {"SPECROUTE_GATEWAY_SNAPSHOT_FILE": str(path), "SPECROUTE_GATEWAY_GATEWAY_ID": "t"}
        | env,
        # uvicorn's access lines go to stdout, everything else to stderr: one pipe for both.
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/readyz", time.monotonic() + 30.0, proc=proc, what="gateway")
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=15)


def stream(url: str, chunks: list[str], first: threading.Event, request_id: str) -> None:
    body = {"model": "tiny", "prompt": "x", "max_tokens": 200, "stream": True}
    headers = {"Authorization": f"Bearer {TENANT_KEY}", "x-request-id": request_id}
    try:
        with httpx.stream(
            "POST", f"{url}/v1/completions", json=body, headers=headers, timeout=30.0
        ) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    chunks.append(line.removeprefix("data: "))
                    first.set()
    except httpx.HTTPError as exc:
        chunks.append(f"error: {type(exc).__name__}")
    finally:
        first.set()


def start_stream(url: str, request_id: str = "req-1") -> tuple[threading.Thread, list[str]]:
    chunks: list[str] = []
    first = threading.Event()
    thread = threading.Thread(target=stream, args=(url, chunks, first, request_id), daemon=True)
    thread.start()
    assert first.wait(15.0) and chunks and not chunks[0].startswith("error")
    return thread, chunks


def tokens(chunks: list[str]) -> int:
    return sum(1 for c in chunks if c.startswith("{") and '" tok"' in c)


def test_sigterm_lets_a_stream_in_flight_finish(tmp_path: Path) -> None:
    # 30 tokens 60 ms apart: the stream runs ~1.8 s, well inside a 20-s grace.
    with (
        serve_app(FakeUpstream(tokens=30, interval_s=0.06)) as upstream,
        gateway_process(tmp_path, upstream, SPECROUTE_GATEWAY_SHUTDOWN_GRACE_S="20") as (
            url,
            proc,
        ),
    ):
        thread, chunks = start_stream(url)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        # The listening socket closes at once: no new request gets in while draining.
        deadline = time.monotonic() + 5.0
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=0.5)
            except httpx.TransportError:
                break
            assert time.monotonic() < deadline, "still accepting connections after SIGTERM"
            time.sleep(0.05)
        thread.join(20.0)
        assert chunks[-1] == "[DONE]", chunks[-3:]
        assert tokens(chunks) == 30
        assert proc.wait(timeout=20) == EXITED_ON_SIGTERM
        assert time.monotonic() - sent < 15.0


def test_a_stream_longer_than_the_grace_is_cut_at_the_deadline(tmp_path: Path) -> None:
    # 100 tokens 100 ms apart (~10 s) against a 1-s grace.
    with (
        serve_app(FakeUpstream(tokens=100, interval_s=0.1)) as upstream,
        gateway_process(tmp_path, upstream, SPECROUTE_GATEWAY_SHUTDOWN_GRACE_S="1") as (
            url,
            proc,
        ),
    ):
        thread, chunks = start_stream(url)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == EXITED_ON_SIGTERM
        exited_after = time.monotonic() - sent
        thread.join(10.0)
        assert "[DONE]" not in chunks
        assert 0 < tokens(chunks) < 100
        assert 0.9 < exited_after < 6.0, exited_after


def test_json_logs_carry_the_request_id(tmp_path: Path) -> None:
    with (
        serve_app(FakeUpstream(tokens=3, interval_s=0.0)) as upstream,
        gateway_process(tmp_path, upstream, SPECROUTE_GATEWAY_LOG_FORMAT="json") as (url, proc),
    ):
        thread, chunks = start_stream(url, request_id="trace-42")
        thread.join(10.0)
        assert chunks[-1] == "[DONE]"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == EXITED_ON_SIGTERM
        out = proc.stdout.read() if proc.stdout else ""
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert lines, "no log lines"
    assert all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
    access = [line for line in lines if line["logger"] == "uvicorn.access"]
    completion = [line for line in access if line["path"] == "/v1/completions"]
    assert len(completion) == 1
    assert completion[0]["request_id"] == "trace-42"
    assert completion[0]["status"] == 200 and completion[0]["method"] == "POST"
    # Probe lines belong to no request.
    assert all("request_id" not in line for line in access if line["path"] == "/readyz")


@pytest.mark.parametrize("log_format", ["xml"])
def test_an_unknown_log_format_refuses_to_start(log_format: str) -> None:
    out = subprocess.run(
        [SPECROUTE, "gateway", "serve"],
        env=os.environ | {"SPECROUTE_GATEWAY_LOG_FORMAT": log_format},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "log_format" in out.stderr


def test_idle_connections_stay_open_for_keep_alive_s(tmp_path: Path) -> None:
    """75 s by default, so a load balancer's pooled connection (idle timeout 60 s on
    many) is never closed under it; uvicorn's own 5 s would be."""
    for name in ("default", "short"):
        (tmp_path / name).mkdir()
    with (
        serve_app(FakeUpstream(tokens=3, interval_s=0.0)) as upstream,
        gateway_process(tmp_path / "default", upstream) as (default_url, _),
        gateway_process(tmp_path / "short", upstream, SPECROUTE_GATEWAY_KEEP_ALIVE_S="1") as (
            short_url,
            _,
        ),
    ):
        assert_kept_and_closed(default_url, short_url)
