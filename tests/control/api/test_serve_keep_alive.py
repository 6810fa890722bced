"""`specroute control serve` keeps an idle connection open for SPECROUTE_KEEP_ALIVE_S
(75 s by default), so a load balancer's or the gateways' pooled connection is not
closed under them at uvicorn's own 5 s."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.fixtures.keep_alive import assert_kept_and_closed
from tests.fixtures.ready import wait_ready
from tests.gateway.server import free_port

SPECROUTE = str(Path(sys.executable).parent / "specroute")


@contextmanager
def control_process(data_dir: Path, **env: str) -> Iterator[str]:
    """A dev-token control plane on SQLite in `data_dir`; its base URL."""
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith("SPECROUTE_")}
    base |= {"SPECROUTE_DATA_DIR": str(data_dir), "SPECROUTE_INTERNAL_TOKEN": "ka-internal"}
    proc = subprocess.Popen(
        [SPECROUTE, "control", "serve", "--port", str(port), "--dev"],
        env=base | env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(f"{url}/readyz", time.monotonic() + 60.0, proc=proc, what="control")
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_idle_connections_stay_open_for_keep_alive_s(tmp_path: Path) -> None:
    for name in ("default", "short"):
        (tmp_path / name).mkdir()
    with (
        control_process(tmp_path / "default") as default_url,
        control_process(tmp_path / "short", SPECROUTE_KEEP_ALIVE_S="1") as short_url,
    ):
        assert_kept_and_closed(default_url, short_url)
