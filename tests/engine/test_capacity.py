"""`specroute engine up` follows the pool's desired_workers from control: the
supervisor grows and shrinks with it. Real processes (the stub server of
test_supervisor.py stands in for vLLM), a real control plane on loopback, a
real agent token."""

import sys
import time
from pathlib import Path

import httpx

from control.app import create_app
from control.db import Database
from control.migrate import upgrade
from control.models import Pool
from control.settings import ControlSettings
from engine.agent.client import ControlClient
from engine.pools.commands import apply_desired
from engine.pools.launcher import ServerCommand
from engine.pools.supervisor import Supervisor
from tests.gateway.server import dead_url, free_port, serve_app

STUB = str(Path(__file__).with_name("crashing_server.py"))


def wait_serving(supervisor: Supervisor, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not supervisor.all_ready():
        assert time.monotonic() < deadline, supervisor.events
        supervisor.check_once()
        time.sleep(0.02)


def test_engine_up_follows_desired_workers(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    upgrade(url)
    settings = ControlSettings(
        data_dir=tmp_path, database_url=url, admin_token="adm", internal_token="int"
    )
    database = Database(url)
    with database.session() as session:
        session.add(Pool(name="p", served_model_name="tiny", target_ref="/m", desired_workers=2))
    ports = [free_port() for _ in range(3)]

    def make(index: int) -> ServerCommand:
        argv = [sys.executable, STUB, "--port", str(ports[index])]
        argv += ["--state", str(tmp_path / f"launches-{index}"), "--crashes", "0"]
        return ServerCommand(argv, {}, ports[index], "127.0.0.1", "tiny", speculative=False)

    resized: list[int] = []
    with serve_app(create_app(settings)) as base:
        enrolled = httpx.post(
            f"{base}/admin/v1/pools/1/agent-tokens",
            json={"name": "agent-p", "allowed_endpoints": ["http://127.0.0.1"]},
            headers={"Authorization": "Bearer adm"},
        )
        assert enrolled.status_code == 201, enrolled.text
        control = ControlClient(base, enrolled.json()["token"])
        spec = control.pool_spec("p")
        supervisor = Supervisor(make, spec.desired_workers, poll_s=0.02)
        supervisor.start(wait=True)
        try:
            assert len(supervisor.servers) == 2

            def set_desired(n: int) -> None:
                with database.session() as session:
                    session.query(Pool).one().desired_workers = n

            on_resized = lambda: resized.append(len(supervisor.servers))  # noqa: E731
            assert apply_desired(supervisor, control, "p", on_resized) == 2
            assert resized == []  # already there: nothing restarted

            set_desired(3)
            assert apply_desired(supervisor, control, "p", on_resized) == 3
            wait_serving(supervisor)
            assert [s.port for s in supervisor.servers] == ports
            assert httpx.get(f"http://127.0.0.1:{ports[2]}/health").status_code == 200

            set_desired(1)
            assert apply_desired(supervisor, control, "p", on_resized) == 1
            assert [s.port for s in supervisor.servers] == ports[:1]
            assert supervisor.events_of(2, "stopped") and supervisor.events_of(1, "stopped")
            assert resized == [3, 1]
        finally:
            supervisor.stop()
            control.close()
    # Control unreachable: the workers keep running as they are.
    supervisor = Supervisor(make, 1, poll_s=0.02)
    supervisor.start(wait=True)
    try:
        unreachable = ControlClient(dead_url(), "token")
        assert apply_desired(supervisor, unreachable, "p", lambda: None) is None
        assert len(supervisor.servers) == 1 and supervisor.servers[0].alive()
    finally:
        supervisor.stop()
    database.dispose()
