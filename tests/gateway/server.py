"""A real gateway on a free loopback port (uvicorn in a thread), fed by a snapshot file."""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp

from gateway.app import create_app
from gateway.settings import GatewaySettings
from gateway.state import GatewayState
from specwire import PolicySnapshot, TelemetryWindow
from tests.gateway.policy import write_snapshot

if TYPE_CHECKING:
    from control.settings import ControlSettings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def dead_url() -> str:
    """A loopback URL nothing listens on: connecting is refused (a real fault)."""
    return f"http://127.0.0.1:{free_port()}"


@dataclass
class GatewayServer:
    base_url: str
    app: FastAPI
    snapshot_path: Path

    @property
    def state(self) -> GatewayState:
        state: GatewayState = self.app.state.gateway
        return state

    def windows(self, requests: int = 1, timeout_s: float = 5.0) -> list[TelemetryWindow]:
        """Drain the telemetry windows until they count `requests` requests in all."""
        windows: list[TelemetryWindow] = []
        deadline = time.monotonic() + timeout_s
        while sum(w.requests for w in windows) < requests:
            assert time.monotonic() < deadline, "the gateway never recorded the request"
            windows += [w for b in self.state.aggregator.drain_all() for w in b.windows]
            time.sleep(0.02)
        return windows

    def set_snapshot(self, snapshot: PolicySnapshot, timeout_s: float = 5.0) -> None:
        """Write the file and wait until the gateway serves that version."""
        write_snapshot(self.snapshot_path, snapshot)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            current = self.state.store.snapshot
            if current is not None and current == snapshot:
                return
            time.sleep(0.02)
        raise AssertionError(f"gateway did not load snapshot v{snapshot.version}")


@contextmanager
def serve_app(app: ASGIApp) -> Iterator[str]:
    """Run `app` (any ASGI app: a FastAPI app, a fake engine) under uvicorn on a free
    loopback port in a thread; yield its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20.0
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15.0)


@dataclass(frozen=True)
class ControlPlane:
    """A served control plane: its base URL, its database and the settings it runs on."""

    url: str
    db_url: str
    settings: "ControlSettings"


@contextmanager
def serve_control(
    tmp_path: Path, admin_token: str, internal_token: str = "unused", **settings: Any
) -> Iterator[ControlPlane]:
    """A control plane on a migrated SQLite file in `tmp_path`, served as `serve_app`
    does. `settings`: any other ControlSettings field."""
    from control.app import create_app
    from control.migrate import upgrade
    from control.settings import ControlSettings

    db_url = f"sqlite:///{tmp_path / 'control.db'}"
    upgrade(db_url)
    control = ControlSettings(
        data_dir=tmp_path,
        database_url=db_url,
        admin_token=admin_token,
        internal_token=internal_token,
        **settings,
    )
    with serve_app(create_app(control)) as url:
        yield ControlPlane(url=url, db_url=db_url, settings=control)


@contextmanager
def run_gateway(
    tmp_path: Path, snapshot: PolicySnapshot | None, **settings: Any
) -> Iterator[GatewayServer]:
    """A gateway on a snapshot file; with `control_url` in settings, on that control plane."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "snapshot.json"
    if snapshot is not None:
        write_snapshot(path, snapshot)
    defaults: dict[str, Any] = {
        "snapshot_poll_s": 0.05,
        "gateway_id": "test-gateway",
        # Tests poll with keys the gateway does not know yet, all from 127.0.0.1: the
        # failure limit is tested on its own (tests/gateway/test_auth_failures.py).
        "auth_failure_burst": 100_000,
    }
    if "control_url" not in settings:
        defaults["snapshot_file"] = path
    config_settings = GatewaySettings(**(defaults | settings))
    app = create_app(config_settings)
    with serve_app(app) as base_url:
        yield GatewayServer(base_url=base_url, app=app, snapshot_path=path)


@contextmanager
def run_control_gateway(
    tmp_path: Path, control_url: str, internal_token: str, **settings: Any
) -> Iterator[GatewayServer]:
    """A gateway on a control plane that polls every 0.2 s and flushes 1-s telemetry
    windows every 0.2 s, so a test sees routing changes and stored windows quickly."""
    fast: dict[str, Any] = {
        "snapshot_poll_s": 0.2,
        "telemetry_window_s": 1,
        "telemetry_flush_s": 0.2,
    }
    with run_gateway(
        tmp_path,
        None,
        control_url=control_url,
        internal_token=internal_token,
        **(fast | settings),
    ) as gw:
        yield gw
