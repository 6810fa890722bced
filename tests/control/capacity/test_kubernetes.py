"""Control scales pool Deployments through the Kubernetes API: the real
`kubernetes` client against a fake API server, a real HTTP server on loopback
that implements the Deployment scale subresource (GET and PATCH of
/apis/apps/v1/namespaces/NS/deployments/NAME/scale) as the API server does.
Faked because no cluster runs here; this path has never run on a cluster."""

import json
import os
import subprocess
import sys
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from control.capacity.kubernetes import KubernetesScaler, apps_api, deployment_name, reconcile
from control.db import Database
from control.migrate import upgrade
from control.models import Pool

PREFIX = "/apis/apps/v1/namespaces/"


@dataclass
class FakeApiServer:
    replicas: dict[str, int]
    forbidden: set[str] = field(default_factory=set)
    requests: list[tuple[str, str, str, Any]] = field(default_factory=list)
    url: str = ""


def status(code: int, reason: str, message: str) -> bytes:
    return json.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
    ).encode()


@contextmanager
def fake_api_server(
    replicas: dict[str, int], forbidden: Collection[str] = frozenset()
) -> Iterator[FakeApiServer]:
    fake = FakeApiServer(dict(replicas), set(forbidden))

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _target(self) -> tuple[str, str] | None:
            path = self.path.split("?")[0]
            if not (path.startswith(PREFIX) and path.endswith("/scale")):
                return None
            parts = path.removeprefix(PREFIX).split("/")
            if len(parts) != 4 or parts[1] != "deployments":
                return None
            return parts[0], parts[2]

        def _handle(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            fake.requests.append((method, self.path, self.headers.get("Content-Type", ""), body))
            assert self.headers.get("Authorization") == "Bearer sa-token"
            target = self._target()
            if target is None:
                return self._answer(404, status(404, "NotFound", "no such route"))
            namespace, name = target
            if name in fake.forbidden:
                message = f'deployments.apps "{name}" is forbidden: cannot {method.lower()} scale'
                return self._answer(403, status(403, "Forbidden", message))
            if name not in fake.replicas or namespace != "specroute":
                return self._answer(404, status(404, "NotFound", f'"{name}" not found'))
            if method == "PATCH":
                assert body is not None
                # A strategic merge patch of the Scale object, as the API server applies it.
                fake.replicas[name] = int(body["spec"]["replicas"])
            scale = {
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"replicas": fake.replicas[name]},
                "status": {"replicas": fake.replicas[name]},
            }
            self._answer(200, json.dumps(scale).encode())

        def do_GET(self) -> None:
            self._handle("GET")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def database_with_pools(tmp_path: Path, pools: dict[str, int]) -> Database:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    upgrade(url)
    database = Database(url)
    with database.session() as session:
        for name, desired in pools.items():
            session.add(
                Pool(name=name, served_model_name="tiny", target_ref="/m", desired_workers=desired)
            )
    return database


def test_deployment_names_follow_the_template() -> None:
    assert deployment_name("tiny-spec", "specroute-engine-{pool}") == "specroute-engine-tiny-spec"
    assert deployment_name("Big_Pool", "engines-{pool}") == "engines-big-pool"


def test_each_pool_deployment_is_scaled_to_its_desired_workers(tmp_path: Path) -> None:
    database = database_with_pools(
        tmp_path, {"tiny-spec": 3, "tiny-base": 1, "gone": 2, "other-team": 4}
    )
    deployments = {
        "specroute-engine-tiny-spec": 1,
        "specroute-engine-tiny-base": 1,
        "specroute-engine-other-team": 2,
    }
    with fake_api_server(deployments, forbidden={"specroute-engine-other-team"}) as api:
        scaler = KubernetesScaler(
            apps_api(api.url, token="sa-token"), "specroute", "specroute-engine-{pool}"
        )
        results = reconcile(database, scaler.scale)
        outcomes = {r.pool: (r.outcome, r.current, r.desired) for r in results}
        assert outcomes == {
            "tiny-spec": ("scaled", 1, 3),
            "tiny-base": ("unchanged", 1, 1),
            "gone": ("no_deployment", None, 2),
            "other-team": ("forbidden", None, 4),
        }
        assert api.replicas == deployments | {"specroute-engine-tiny-spec": 3}
        patches = [r for r in api.requests if r[0] == "PATCH"]
        assert patches == [
            (
                "PATCH",
                f"{PREFIX}specroute/deployments/specroute-engine-tiny-spec/scale",
                "application/strategic-merge-patch+json",  # the client's default for a dict
                {"spec": {"replicas": 3}},
            )
        ]
        # A second pass finds everything in place and patches nothing more.
        again = reconcile(database, scaler.scale)
        assert {r.pool: r.outcome for r in again}["tiny-spec"] == "unchanged"
        assert [r for r in api.requests if r[0] == "PATCH"] == patches
    database.dispose()


def test_a_policy_change_reaches_the_deployment(tmp_path: Path) -> None:
    database = database_with_pools(tmp_path, {"tiny-spec": 2})
    with fake_api_server({"specroute-engine-tiny-spec": 2}) as api:
        scaler = KubernetesScaler(
            apps_api(api.url, "sa-token"), "specroute", "specroute-engine-{pool}"
        )
        assert [r.outcome for r in reconcile(database, scaler.scale)] == ["unchanged"]
        with database.session() as session:
            pool = session.query(Pool).one()
            pool.desired_workers = 0
        assert [r.outcome for r in reconcile(database, scaler.scale)] == ["scaled"]
        assert api.replicas["specroute-engine-tiny-spec"] == 0
    database.dispose()


@pytest.mark.parametrize(("forbidden", "exit_code"), [(set(), 0), ({"specroute-engine-a"}, 1)])
def test_the_capacity_command_makes_one_pass(
    tmp_path: Path, forbidden: set[str], exit_code: int
) -> None:
    database = database_with_pools(tmp_path, {"a": 2})
    database.dispose()
    with fake_api_server({"specroute-engine-a": 1}, forbidden=forbidden) as api:
        out = subprocess.run(
            [
                str(Path(sys.executable).parent / "specroute"),
                "control",
                "capacity",
                "--kubernetes",
                "--once",
                "--api-host",
                api.url,
            ],
            env=os.environ
            | {
                "SPECROUTE_DATABASE_URL": database.url,
                "SPECROUTE_CAPACITY_NAMESPACE": "specroute",
                "SPECROUTE_CAPACITY_API_TOKEN": "sa-token",
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == exit_code, out.stdout + out.stderr
        expected = 1 if forbidden else 2
        assert api.replicas["specroute-engine-a"] == expected
        assert ("scaled 1 -> 2" in out.stdout) is not bool(forbidden)
