"""The real stack the end-to-end tests stand up around the session vLLM servers.

- `engine_agents`: the engine agent beside each session server, enrolled for its
  pool through the admin API and heartbeating to control;
- `automation_worker`: a real Celery worker (in a thread) on the automation app
  with control's own settings, so it shares control's database and broker and
  also runs the guard tasks control sends when telemetry lands;
- `wait_routable`: until a gateway polling control sees healthy workers.

Control's API itself (under uvicorn on a migrated SQLite file) is
`tests.gateway.server.serve_control`.
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager

from celery.contrib.testing.worker import start_worker
from kombu.transport import sqlalchemy as sql_transport

from control.automation.app import create_celery_app
from control.automation.celery_app import AutomationCelery
from control.settings import ControlSettings
from engine.agent.client import ControlClient
from engine.agent.heartbeat import HeartbeatAgent, WorkerProbe
from specwire.admin_client import AdminClient
from tests.fixtures.vllm import RunningServer
from tests.gateway.server import GatewayServer


@contextmanager
def automation_worker(settings: ControlSettings) -> Iterator[AutomationCelery]:
    # NOTE: kombu's SQL transport polls every second; faster polling only shortens waits.
    sql_transport.Transport.polling_interval = 0.05
    app = create_celery_app(settings)
    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING"):
        yield app
    app.database.dispose()


@contextmanager
def engine_agents(
    admin: AdminClient,
    control_url: str,
    pools: dict[str, int],
    servers: dict[str, RunningServer],
    *,
    prefix: str,
) -> Iterator[None]:
    """One agent per server (`servers` and `pools` keyed alike), named `<prefix>-<key>`,
    beating every 3 s; a server's agent reports speculation when the server speculates."""
    clients = []
    agents = []
    for name, srv in servers.items():
        token = admin.call(
            "POST",
            f"/pools/{pools[name]}/agent-tokens",
            json={"name": f"{prefix}-{name}", "allowed_endpoints": ["http://127.0.0.1"]},
        )["token"]
        client = ControlClient(control_url, token)
        clients.append(client)
        probe = WorkerProbe(
            pool_id=pools[name], endpoint_url=srv.base_url, speculative=srv.speculative
        )
        agents.append(HeartbeatAgent(f"{prefix}-{name}", probe, client, interval=3.0))
    for agent in agents:
        agent.beat_once()
        agent.start()
    try:
        yield
    finally:
        for agent in agents:
            agent.stop()
        for client in clients:
            client.close()


def wait_routable(gw: GatewayServer, pools: int = 2, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        snap = gw.state.store.snapshot
        if (
            snap is not None
            and len(snap.pools) == pools
            and all(p.healthy_workers() for p in snap.pools)
        ):
            return
        time.sleep(0.1)
    raise AssertionError("the gateway never saw healthy workers in every pool")
