"""`specroute control serve` and `specroute gateway serve` over TLS: real processes
with a self-signed certificate, called by a real HTTPS client that trusts only that
certificate; the flags or the settings turn it on, half a pair is refused at start."""

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import pytest

from tests.fixtures.ready import wait_ready
from tests.fixtures.tls import self_signed
from tests.gateway.policy import TENANT_KEY, make_snapshot, write_snapshot
from tests.gateway.server import free_port

SPECROUTE = str(Path(sys.executable).parent / "specroute")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECROUTE_")}
    snapshot = write_snapshot(
        tmp_path / "s.json", make_snapshot(spec_urls=[], baseline_urls=[], version=2)
    )
    return (
        env
        | {
            "SPECROUTE_DATA_DIR": str(tmp_path),
            "SPECROUTE_INTERNAL_TOKEN": "tls-internal",
            "SPECROUTE_GATEWAY_SNAPSHOT_FILE": str(snapshot),
            "SPECROUTE_GATEWAY_GATEWAY_ID": "tls",
        }
        | extra
    )


@contextmanager
def serving(args: list[str], env: dict[str, str], cert: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [SPECROUTE, *args, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"https://127.0.0.1:{port}"
    try:
        wait_ready(
            f"{base}/healthz",
            time.monotonic() + 60.0,
            proc=proc,
            what=f"{args[0]} over TLS",
            interval=0.2,
            verify=str(cert),
        )
        yield base
    finally:
        proc.kill()
        proc.wait(timeout=15)


def test_the_gateway_serves_https_with_the_flags(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    args = ["gateway", "serve", "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)]
    with serving(args, _env(tmp_path), cert) as base:
        client = openai.OpenAI(
            base_url=f"{base}/v1",
            api_key=TENANT_KEY,
            http_client=openai.DefaultHttpxClient(verify=str(cert)),
            max_retries=0,
        )
        assert [m.id for m in client.models.list()] == ["tiny"]
        # A client that does not trust the certificate is refused by the handshake.
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{base}/healthz")
        with pytest.raises(httpx.TransportError):
            httpx.get(base.replace("https://", "http://") + "/healthz", timeout=5.0)


def test_control_serves_https_from_its_settings(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    env = _env(tmp_path, SPECROUTE_SSL_CERTFILE=str(cert), SPECROUTE_SSL_KEYFILE=str(key))
    with serving(["control", "serve", "--dev"], env, cert) as base:
        pairs = httpx.get(
            f"{base}/admin/v1/pairs",
            headers={"Authorization": "Bearer specroute-admin-dev"},
            verify=str(cert),
        )
        assert pairs.status_code == 200, pairs.text


@pytest.mark.parametrize("service", ["control", "gateway"])
def test_half_a_tls_pair_is_refused_at_start(tmp_path: Path, service: str) -> None:
    cert, key = self_signed(tmp_path)
    for args, why in [
        (["--ssl-certfile", str(cert)], "a certificate was given without its key"),
        (
            ["--ssl-certfile", str(cert), "--ssl-keyfile", str(tmp_path / "none.key")],
            "TLS file not found",
        ),
        (["--ssl-certfile", str(key), "--ssl-keyfile", str(key)], "cannot load"),
    ]:
        dev = ["--dev"] if service == "control" else []
        done = subprocess.run(
            [SPECROUTE, service, "serve", "--port", str(free_port()), *dev, *args],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert why in done.stderr and "Traceback" not in done.stderr
