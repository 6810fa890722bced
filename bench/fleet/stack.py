"""The fleet: real specroute processes on namespace hosts, behind haproxy.

Layout (each name a network namespace with its own address on one bridge):

    lb     haproxy: :8080 -> the gateways (leastconn, /readyz checks),
                    :8000 -> the control replicas (/healthz checks)
    app1   gateway gw1, gateway gw2, control c1
    app2   gateway gw3, control c2, celery beat
    wk1    celery worker 1          wk2   celery worker 2
    eng1   spec + baseline engine   eng2  spec + baseline engine
    data   redis-server (quotas, snapshot wake-ups; private to the run, so it
           can be paused without touching the machine's Redis)
    root   the harness (the `openai` client) and a TCP relay to the machine's
           PostgreSQL (a database made for the run) and RabbitMQ (a vhost
           made for the run)

Everything is a `specroute ...` command or `python -m bench.fleet.engine`
started with `ip netns exec`; `Fleet.close()` stops every process, deletes the
database, the vhost, the namespaces and the run's directory of logs (kept when
SPECROUTE_FLEET_KEEP_LOGS is set), and is safe to call twice.
"""

import atexit
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from bench.fleet.netns import Host, Network, sweep_stale
from bench.provision import post_json, register_tiny_pair
from demo.processes import Child, ProcessStack, StartupError, wait_http_ok
from engine.pools.local import tiny_pair_dir

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN_DSN = os.environ.get(
    "SPECROUTE_FLEET_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)
PG_PORT, RABBIT_PORT = 5432, 5672
GATEWAY_PORTS = {"gw1": 8081, "gw2": 8082, "gw3": 8081}
GATEWAY_HOSTS = {"gw1": "app1", "gw2": "app1", "gw3": "app2"}
CONTROL_HOSTS = {"c1": "app1", "c2": "app2"}
WORKER_HOSTS = {"worker1": "wk1", "worker2": "wk2"}
ENGINE_HOSTS = ("eng1", "eng2")
SPEC_PORT, BASE_PORT = 9001, 9002
MODEL = "fleet-model"
TASK_HEADER = {"x-specroute-task": "code"}


@dataclass(frozen=True)
class FleetOptions:
    tokens: int = 16  # tokens per fake response
    interval_ms: float = 5.0  # gap before each token
    connect_timeout_s: float = 0.5
    response_header_timeout_s: float = 1.0  # a silent (partitioned) worker, then the next
    beat_seconds: float = 1.0  # engine agents' heartbeat interval
    stale_after_s: float = 3.0  # control: a worker this silent is unhealthy
    snapshot_poll_s: float = 1.0
    guard_interval_s: float = 1.0
    quota_budget: int = 2000  # weighted tokens per minute of the `metered` tenant


@dataclass
class Fleet:
    options: FleetOptions = field(default_factory=FleetOptions)
    net: Network = field(default_factory=Network)
    work: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="specroute-fleet-")))
    admin_token: str = field(default_factory=lambda: f"fleet-admin-{secrets.token_hex(8)}")
    internal_token: str = field(default_factory=lambda: f"fleet-int-{secrets.token_hex(8)}")
    world: dict[str, Any] = field(default_factory=dict)
    children: dict[str, Child] = field(default_factory=dict)
    _envs: dict[str, dict[str, str]] = field(default_factory=dict)
    _database: str | None = None
    _vhost: str | None = None
    _stack: ProcessStack | None = None
    _relay: subprocess.Popen[bytes] | None = None

    # ---- addresses ---------------------------------------------------------------
    def host(self, name: str) -> Host:
        return self.net.hosts[name]

    @property
    def lb(self) -> str:
        return self.host("lb").address

    @property
    def gateway_url(self) -> str:
        return f"http://{self.lb}:8080"

    @property
    def control_url(self) -> str:
        return f"http://{self.lb}:8000"

    def gateway_direct_url(self, gw: str) -> str:
        return f"http://{self.host(GATEWAY_HOSTS[gw]).address}:{GATEWAY_PORTS[gw]}"

    def engine_url(self, host: str, port: int) -> str:
        return f"http://{self.host(host).address}:{port}"

    def database_url(self, via: str, app: str = "fleet") -> str:
        return (
            f"postgresql+psycopg://postgres@{via}:{PG_PORT}/{self._database}?application_name={app}"
        )

    @property
    def broker_url(self) -> str:
        vhost = self._vhost or ""
        return f"amqp://guest:guest@{self.net.gateway_address}:{RABBIT_PORT}/{vhost}"

    @property
    def redis_url(self) -> str:
        return f"redis://{self.host('data').address}:6379/0"

    # ---- bring-up ----------------------------------------------------------------
    def start(self) -> "Fleet":
        # NOTE: also on an interpreter exit that skips the caller's finally (an
        # uncaught signal turned into SystemExit, a crash in another thread); after a
        # SIGKILL the next run's sweep_stale removes the namespaces and their processes.
        atexit.register(self.close)
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        sweep_stale()
        self.net.open()
        for name in ("lb", "app1", "app2", "wk1", "wk2", *ENGINE_HOSTS, "data"):
            self.net.add_host(name)
        self._stack = ProcessStack(self.work / "logs", grace_s=5.0)
        self._start_relay()
        self._make_database()
        self._make_vhost()
        self._spawn("redis", "data", self._redis_argv(), {})
        for name, host in CONTROL_HOSTS.items():
            self._spawn(name, host, self._control_argv(host), self._control_env(name))
        self._write_haproxy()
        self._spawn(
            "haproxy", "lb", ["haproxy", "-W", "-db", "-f", str(self.work / "haproxy.cfg")], {}
        )
        for name in CONTROL_HOSTS:
            wait_http_ok(
                f"http://{self.host(CONTROL_HOSTS[name]).address}:8000/healthz",
                self.children[name],
                60,
            )
        wait_http_ok(self.control_url + "/healthz", self.children["haproxy"], 30)
        self.world = provision(self)
        for host in ENGINE_HOSTS:
            for kind, port in (("spec", SPEC_PORT), ("base", BASE_PORT)):
                self._spawn_engine(host, kind, port)
        for gw in GATEWAY_PORTS:
            self._spawn_gateway(gw)
        for name, host in WORKER_HOSTS.items():
            self._spawn(name, host, self._worker_argv(name), self._worker_env(name))
        self._spawn(
            "beat",
            "app2",
            [*self._specroute(), "beat", "--loglevel", "WARNING"],
            self._worker_env("beat"),
        )
        self.wait_routable()

    def _specroute(self) -> list[str]:
        exe = Path(sys.executable).parent / "specroute"
        if exe.is_file():
            return [str(exe)]
        return [sys.executable, "-c", "from control.cli import app; app()"]

    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("SPECROUTE_") and k not in ("PROMETHEUS_MULTIPROC_DIR",)
        }
        env["PYTHONPATH"] = str(ROOT)
        return env | extra

    def _spawn(self, name: str, host: str, argv: list[str], env: dict[str, str]) -> Child:
        assert self._stack is not None
        child = self._stack.start(name, self.host(host).exec_argv(argv), self._env(env))
        self.children[name] = child
        self._envs[name] = env
        return child

    def _start_relay(self) -> None:
        bridge = self.net.gateway_address
        log = (self.work / "relay.log").open("wb")
        self._relay = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.fleet.relay",
                f"{bridge}:{PG_PORT}=127.0.0.1:{PG_PORT}",
                f"{bridge}:{RABBIT_PORT}=127.0.0.1:{RABBIT_PORT}",
            ],
            env=self._env({}),
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
        )
        assert self._relay.stdout is not None
        line = self._relay.stdout.readline()
        if b"relay ready" not in line:
            raise StartupError(f"the relay did not start: {line!r}")

    def _make_database(self) -> None:
        from control.migrate import upgrade

        name = f"fleet_{self.net.tag}_{secrets.token_hex(3)}"
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self._database = name
        upgrade(self.database_url("127.0.0.1", "fleet-migrate"))

    def _make_vhost(self) -> None:
        # NOTE: a vhost of its own keeps this run's Celery messages away from any other
        # user of the machine's RabbitMQ (the automation's queue name is fixed).
        if shutil.which("rabbitmqctl") is None:
            return
        vhost = f"fleet-{self.net.tag}-{secrets.token_hex(3)}"
        subprocess.run(
            ["rabbitmqctl", "-q", "add_vhost", vhost], check=True, timeout=60, capture_output=True
        )
        self._vhost = vhost
        subprocess.run(
            ["rabbitmqctl", "-q", "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"],
            check=True,
            timeout=60,
            capture_output=True,
        )

    def _redis_argv(self) -> list[str]:
        return [
            "redis-server", "--bind", self.host("data").address, "--port", "6379",
            "--save", "", "--appendonly", "no", "--dir", str(self.work),
            "--protected-mode", "no",
        ]  # fmt: skip

    def _control_argv(self, host: str) -> list[str]:
        return [
            *self._specroute(), "control", "serve", "--host", self.host(host).address,
            "--port", "8000", "--no-migrate", "--log-level", "warning",
        ]  # fmt: skip

    def _common_control_env(self, name: str) -> dict[str, str]:
        data_dir = self.work / name
        data_dir.mkdir(parents=True, exist_ok=True)
        return {
            "SPECROUTE_DATA_DIR": str(data_dir),
            "SPECROUTE_DATABASE_URL": self.database_url(self.net.gateway_address, f"fleet-{name}"),
            "SPECROUTE_ADMIN_TOKEN": self.admin_token,
            "SPECROUTE_INTERNAL_TOKEN": self.internal_token,
            "SPECROUTE_REDIS_URL": self.redis_url,
            "SPECROUTE_BROKER_URL": self.broker_url,
            "SPECROUTE_RESULT_BACKEND": "db+"
            + self.database_url(self.net.gateway_address, f"fleet-{name}-results"),
            "SPECROUTE_WORKER_STALE_AFTER_S": str(self.options.stale_after_s),
            "SPECROUTE_WORKER_RESTART_GRACE_S": "1",
            "SPECROUTE_MODEL_ROOTS": f'["{tiny_pair_dir()}"]',
        }

    def _control_env(self, name: str) -> dict[str, str]:
        return self._common_control_env(name)

    def _worker_argv(self, name: str) -> list[str]:
        return [
            *self._specroute(), "worker", "--pool", "solo", "--loglevel", "WARNING",
            "--hostname", f"{name}@{WORKER_HOSTS[name]}",
        ]  # fmt: skip

    def _worker_env(self, name: str) -> dict[str, str]:
        return self._common_control_env(name) | {
            "SPECROUTE_GUARD_INTERVAL_S": str(self.options.guard_interval_s),
            "SPECROUTE_PROBATION_INTERVAL_S": str(self.options.guard_interval_s),
            "SPECROUTE_EVALUATION_INTERVAL_S": "3600",
            "SPECROUTE_DEPTH_INTERVAL_S": "3600",
        }

    def kv_file(self, host: str, kind: str) -> Path:
        return self.work / f"kv-{host}-{kind}"

    def set_kv_usage(self, kind: str, usage: float) -> None:
        for host in ENGINE_HOSTS:
            self.kv_file(host, kind).write_text(str(usage))

    def _spawn_engine(self, host: str, kind: str, port: int) -> None:
        pool = self.world["pools"][kind]
        self.kv_file(host, kind).write_text("0.1")
        argv = [
            sys.executable, "-m", "bench.fleet.engine", "--host", self.host(host).address,
            "--port", str(port), "--pool-id", str(pool["id"]),
            "--worker-id", f"{host}-{kind}", "--control-url", self.control_url,
            "--kv-file", str(self.kv_file(host, kind)), "--model", MODEL,
            "--tokens", str(self.options.tokens), "--interval-ms", str(self.options.interval_ms),
            "--beat-seconds", str(self.options.beat_seconds),
            *(["--speculative"] if kind == "spec" else []),
        ]  # fmt: skip
        self._spawn(f"{host}-{kind}", host, argv, {"SPECROUTE_AGENT_TOKEN": pool["agent_token"]})

    def _spawn_gateway(self, gw: str) -> Child:
        host = GATEWAY_HOSTS[gw]
        env = {
            "SPECROUTE_GATEWAY_CONTROL_URL": self.control_url,
            "SPECROUTE_GATEWAY_INTERNAL_TOKEN": self.internal_token,
            "SPECROUTE_GATEWAY_GATEWAY_ID": gw,
            "SPECROUTE_GATEWAY_REDIS_URL": self.redis_url,
            "SPECROUTE_GATEWAY_SNAPSHOT_POLL_S": str(self.options.snapshot_poll_s),
            "SPECROUTE_GATEWAY_TELEMETRY_WINDOW_S": "2",
            "SPECROUTE_GATEWAY_TELEMETRY_FLUSH_S": "1",
            "SPECROUTE_GATEWAY_CONNECT_TIMEOUT_S": str(self.options.connect_timeout_s),
            "SPECROUTE_GATEWAY_SHUTDOWN_GRACE_S": "3",
            "SPECROUTE_GATEWAY_IDLE_TIMEOUT_S": "2",
            "SPECROUTE_GATEWAY_FIRST_TOKEN_TIMEOUT_S": "5",
            "SPECROUTE_GATEWAY_RESPONSE_HEADER_TIMEOUT_S": str(
                self.options.response_header_timeout_s
            ),
        }
        argv = [
            *self._specroute(), "gateway", "serve", "--host", self.host(host).address,
            "--port", str(GATEWAY_PORTS[gw]), "--log-level", "warning",
        ]  # fmt: skip
        return self._spawn(gw, host, argv, env)

    def _write_haproxy(self) -> None:
        gateways = "\n".join(
            f"  server {gw} {self.host(h).address}:{GATEWAY_PORTS[gw]} check"
            for gw, h in GATEWAY_HOSTS.items()
        )
        controls = "\n".join(
            f"  server {c} {self.host(h).address}:8000 check" for c, h in CONTROL_HOSTS.items()
        )
        (self.work / "haproxy.cfg").write_text(
            HAPROXY_CONFIG.format(lb=self.lb, gateways=gateways, controls=controls)
        )

    # ---- state -------------------------------------------------------------------
    def admin(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.control_url + "/admin/v1",
            headers={"Authorization": f"Bearer {self.admin_token}"},
            timeout=10.0,
        )

    def control_snapshot(self) -> dict[str, Any]:
        response = httpx.get(
            self.control_url + "/internal/v1/snapshot",
            headers={"Authorization": f"Bearer {self.internal_token}"},
            timeout=10.0,
        )
        response.raise_for_status()
        doc: dict[str, Any] = response.json()
        return doc

    def gateway_version(self, gw: str, timeout: float = 1.0) -> int | None:
        try:
            doc = httpx.get(self.gateway_direct_url(gw) + "/readyz", timeout=timeout).json()
        except (httpx.HTTPError, ValueError):
            return None
        version = doc.get("snapshot_version")
        return int(version) if version is not None else None

    def wait_routable(self, timeout_s: float = 90.0) -> int:
        """Until control's snapshot has both pools with 2 healthy workers and every
        gateway routes on it (or newer). Returns that version."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(httpx.HTTPError):
                snap = self.control_snapshot()
                healthy = [
                    sum(1 for w in pool["workers"] if w.get("healthy")) for pool in snap["pools"]
                ]
                if healthy == [2, 2]:
                    versions = [self.gateway_version(gw) for gw in GATEWAY_PORTS]
                    up = httpx.get(self.gateway_url + "/readyz", timeout=1.0).is_success
                    if up and all(v is not None and v >= snap["version"] for v in versions):
                        return int(snap["version"])
            time.sleep(0.3)
        raise StartupError("the fleet never became routable:\n" + self.log_tails())

    def _check_alive(self) -> None:
        dead = [c for c in self.children.values() if not c.alive()]
        if dead:
            raise StartupError(
                "; ".join(f"{c.name} exited {c.process.returncode}" for c in dead)
                + "\n"
                + self.log_tails([c.name for c in dead])
            )

    def log_tails(self, names: list[str] | None = None) -> str:
        out = []
        for name, child in self.children.items():
            if names is None or name in names:
                out.append(f"--- {name}\n{child.log_tail(15)}")
        return "\n".join(out)

    # ---- faults ------------------------------------------------------------------
    def kill(self, name: str) -> None:
        """SIGKILL a child's whole process group: the process dies as in a crash."""
        child = self.children[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.process.wait(timeout=10)

    def restart(self, name: str) -> Child:
        assert self._stack is not None
        old = self.children[name]
        child = self._stack.start(name, old.argv, self._env(self._envs[name]))
        self.children[name] = child
        return child

    def pause(self, name: str) -> None:
        os.killpg(self.children[name].pid, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        os.killpg(self.children[name].pid, signal.SIGCONT)

    def sql(self, query: str, *params: object) -> list[tuple[Any, ...]]:
        dsn = f"postgresql://postgres@127.0.0.1:{PG_PORT}/{self._database}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            return list(conn.execute(query, params).fetchall())

    def pg_connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        return psycopg.connect(f"postgresql://postgres@127.0.0.1:{PG_PORT}/{self._database}")

    def stop_gateways(self) -> None:
        """SIGTERM every live gateway: each flushes its last telemetry windows."""
        assert self._stack is not None
        self._stack.stop_named({gw for gw in GATEWAY_PORTS if self.children[gw].alive()})

    # ---- tear-down ---------------------------------------------------------------
    def close(self) -> None:
        if self._stack is not None:
            _stop_all(self._stack.children)
            self._stack.stop()  # reaps the groups and whatever they left behind
            self._stack = None
        if self._relay is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._relay.pid, signal.SIGKILL)
            self._relay.wait(timeout=10)
            self._relay = None
        self.net.close()
        if self._database is not None:
            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn,
            ):
                conn.execute(f'DROP DATABASE IF EXISTS "{self._database}" WITH (FORCE)')
            self._database = None
        if self._vhost is not None:
            subprocess.run(
                ["rabbitmqctl", "-q", "delete_vhost", self._vhost], timeout=60, capture_output=True
            )
            self._vhost = None
        if not os.environ.get("SPECROUTE_FLEET_KEEP_LOGS"):
            shutil.rmtree(self.work, ignore_errors=True)
        atexit.unregister(self.close)

    def __enter__(self) -> "Fleet":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stop_all(children: list[Child], grace_s: float = 5.0) -> None:
    """SIGTERM every group at once (a paused one gets SIGCONT too, or it never sees
    the signal), wait for all together, SIGKILL what is left: seconds, not a grace
    period per process."""
    for child in children:
        for sig in (signal.SIGCONT, signal.SIGTERM):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, sig)
    deadline = time.monotonic() + grace_s
    for child in children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.process.wait(timeout=max(deadline - time.monotonic(), 0.01))
    for child in children:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)
        child.process.wait(timeout=10)


HAPROXY_CONFIG = """\
global
  maxconn 4096
defaults
  mode http
  timeout connect 1s
  timeout client 60s
  timeout http-request 10s
  timeout server 60s
  timeout check 1s
  retries 2
  option redispatch
  retry-on conn-failure
  default-server inter 300ms fall 2 rise 2
frontend gateways
  bind {lb}:8080
  default_backend gateways
backend gateways
  balance leastconn
  # NOTE: a fresh server connection per request, so a request to a replica that
  # just died fails to connect and is redispatched (retry-on conn-failure), never
  # written into a dead kept-alive connection (a 502 to the client).
  option http-server-close
  option httpchk GET /readyz
  http-response set-header x-fleet-gateway %s
{gateways}
frontend control
  bind {lb}:8000
  default_backend control
backend control
  balance roundrobin
  option httpchk GET /healthz
{controls}
"""


def provision(fleet: Fleet) -> dict[str, Any]:
    """Register the pair, the pools, a rollout in canary, tenants and agent tokens."""
    allowed = [f"http://{fleet.host(h).address}" for h in ENGINE_HOSTS]
    pair_dir = tiny_pair_dir()
    with fleet.admin() as admin:

        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            return post_json(admin, path, body)

        version = register_tiny_pair(admin, pair_dir)
        pools = {
            "spec": post(
                "/pools",
                {
                    "name": "fleet-spec",
                    "served_model_name": MODEL,
                    "target_ref": str(pair_dir / "target"),
                    "pair_version_id": version["id"],
                },
            ),
            "base": post(
                "/pools",
                {
                    "name": "fleet-base",
                    "served_model_name": MODEL,
                    "target_ref": str(pair_dir / "target"),
                },
            ),
        }
        for kind, pool in pools.items():
            pool["agent_token"] = post(
                f"/pools/{pool['id']}/agent-tokens",
                {"name": f"agents-{kind}", "allowed_endpoints": allowed},
            )["token"]
        segment = post("/segments", {"name": "code", "selector": {"tasks": ["code"]}})
        thresholds = post(
            "/threshold-sets",
            {
                "name": "fleet",
                "min_acceptance_rate": 0.1,
                "min_mean_acceptance_length": 1.1,
                "min_speedup": 0.01,
                "max_kv_cache_usage": 0.9,
                "memory_pressure_beats": 2,
                "min_samples": 100000,
                "stage_dwell_seconds": 3600,
                "guard_dwell_seconds": 3600,
                "probation_percentage": 50.0,
                "cooldown_seconds": 1,
            },
        )
        rollout = post(
            "/rollouts",
            {
                "name": "code-tiny",
                "segment_id": segment["id"],
                "pair_version_id": version["id"],
                "spec_pool_id": pools["spec"]["id"],
                "baseline_pool_id": pools["base"]["id"],
                "threshold_set_id": thresholds["id"],
                "stages": [50, 100],
            },
        )
        post(
            f"/rollouts/{rollout['id']}/start",
            {"waive": ["offline_evaluation", "shadow"], "reason": "fleet run: canary"},
        )
        apps = post("/tenants", {"name": "apps"})
        key = post(f"/tenants/{apps['id']}/keys", {"name": "k"})["key"]
        metered = post(
            "/tenants",
            {"name": "metered", "weighted_tokens_per_minute": fleet.options.quota_budget},
        )
        metered_key = post(f"/tenants/{metered['id']}/keys", {"name": "k"})["key"]
    return {
        "pools": pools,
        "rollout": rollout,
        "key": key,
        "metered_key": metered_key,
    }
