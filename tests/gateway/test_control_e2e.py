"""The gateway on the real control plane: its snapshot (ETag/304), keys and flips.

Control runs for real (create_app on a migrated SQLite file, under uvicorn);
the tenant and its key are made through the admin API, as an admin would.
"""

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.server import GatewayServer, run_gateway, serve_app

ADMIN = "e2e-admin-token"
INTERNAL = "e2e-internal-token"


@pytest.fixture
def control_url(tmp_path: Path) -> Iterator[str]:
    from control.app import create_app
    from control.migrate import upgrade
    from control.settings import ControlSettings

    db_url = f"sqlite:///{tmp_path / 'control.db'}"
    upgrade(db_url)
    settings = ControlSettings(
        data_dir=tmp_path, database_url=db_url, admin_token=ADMIN, internal_token=INTERNAL
    )
    with serve_app(create_app(settings)) as url:
        yield url


def _admin(url: str, path: str, body: dict[str, object]) -> dict[str, object]:
    resp = httpx.post(
        url + "/admin/v1" + path, json=body, headers={"Authorization": f"Bearer {ADMIN}"}
    )
    assert resp.status_code == 201, resp.text
    doc: dict[str, object] = resp.json()
    return doc


def _new_tenant_key(url: str, name: str) -> str:
    tenant = _admin(url, "/tenants", {"name": name})
    key = _admin(url, f"/tenants/{tenant['id']}/keys", {"name": "k"})
    return str(key["key"])


def _version(gw: GatewayServer) -> int:
    snapshot = gw.state.store.snapshot
    assert snapshot is not None
    return snapshot.version


def _wait_for_key(gw: GatewayServer, key: str, timeout_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        resp = httpx.get(gw.base_url + "/v1/models", headers={"Authorization": f"Bearer {key}"})
        if resp.status_code == 200:
            return time.monotonic() - started
        assert resp.status_code in (401, 503), resp.text
        time.sleep(0.05)
    raise AssertionError("the gateway never accepted the new key")


def test_gateway_follows_control_snapshot(tmp_path: Path, control_url: str) -> None:
    first_key = _new_tenant_key(control_url, "acme")
    with run_gateway(
        tmp_path, None, control_url=control_url, internal_token=INTERNAL, snapshot_poll_seconds=0.2
    ) as gw:
        assert httpx.get(gw.base_url + "/readyz").status_code == 200
        _wait_for_key(gw, first_key, 5.0)
        version = _version(gw)
        polls = gw.app.state.poller.polls
        time.sleep(0.6)
        # Unchanged policy: polls keep coming back 304, the snapshot stays and is fresh.
        assert gw.app.state.poller.polls > polls
        assert _version(gw) == version
        assert gw.state.store.age_s() < 1.0
        second_key = _new_tenant_key(control_url, "globex")
        flip_s = _wait_for_key(gw, second_key, 5.0)
        assert _version(gw) > version
        # One poll interval plus a round trip.
        assert flip_s < 2.0
