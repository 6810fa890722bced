"""Bring the embedded stack up for the demo: control API, Celery worker and beat on
the SQLite broker, a speculating and a baseline vLLM pool with their agents, and
the gateway. Each is a `specroute ...` child process with its log under the data
dir; `demo.processes.ProcessStack` stops them all.
"""

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from demo.plan import (
    DEFAULT_SEGMENTS,
    AdminClient,
    Provisioned,
    SegmentPlan,
    provision,
    start_rollouts,
)
from demo.processes import Child, ProcessStack, StartupError, reap_manifest, wait_http_ok
from engine.pools.local import tiny_pair_dir, tiny_pair_present
from engine.tiny.styles import adapter_dir

MARKER = ".specroute-demo"
# Intervals short enough that the automation judges within a demo's minutes.
AUTOMATION_ENV = {
    "SPECROUTE_EVALUATION_INTERVAL_S": "20",
    "SPECROUTE_GUARD_INTERVAL_S": "5",
    "SPECROUTE_PROBATION_INTERVAL_S": "30",
}
GATEWAY_ENV = {
    "SPECROUTE_GATEWAY_SNAPSHOT_POLL_S": "1",
    "SPECROUTE_GATEWAY_TELEMETRY_WINDOW_S": "5",
    "SPECROUTE_GATEWAY_TELEMETRY_FLUSH_S": "2",
    "SPECROUTE_GATEWAY_GATEWAY_ID": "demo-gateway",
}
Tick = Callable[[str], None]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def specroute_exe() -> list[str]:
    """The `specroute` of this interpreter's environment (works without activating it)."""
    script = Path(sys.executable).parent / "specroute"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from control.cli import app; app()"]


def prepare_data_dir(data_dir: Path) -> Path:
    """A clean demo data dir, after stopping whatever a hard-killed previous run left.
    Refuses to wipe a non-empty directory the demo did not make."""
    data_dir = data_dir.resolve()
    if data_dir.exists() and any(data_dir.iterdir()):
        if not (data_dir / MARKER).exists():
            raise StartupError(
                f"{data_dir} is not empty and was not made by the demo; pick another --data-dir"
            )
        reap_manifest(data_dir / "processes.json")
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / MARKER).write_text("made by `specroute demo`; wiped by its next run\n")
    return data_dir


@dataclass
class Endpoints:
    control_url: str
    gateway_url: str
    spec_port: int
    baseline_port: int
    admin_token: str
    internal_token: str


@dataclass
class DemoStack:
    data_dir: Path
    stack: ProcessStack
    endpoints: Endpoints
    provisioned: Provisioned | None = None
    children: dict[str, Child] = field(default_factory=dict)
    heavy_extra_layers: int = 0  # 0: the bundled tiny pair as shipped

    @classmethod
    def create(cls, data_dir: Path) -> "DemoStack":
        endpoints = Endpoints(
            control_url=f"http://127.0.0.1:{free_port()}",
            gateway_url=f"http://127.0.0.1:{free_port()}",
            spec_port=free_port(),
            baseline_port=free_port(),
            admin_token=f"demo-admin-{secrets.token_hex(8)}",
            internal_token=f"demo-internal-{secrets.token_hex(8)}",
        )
        stack = ProcessStack(
            data_dir / "logs",
            manifest=data_dir / "processes.json",
            # Ports only: the tokens stay out of files.
            manifest_extra={
                "control_url": endpoints.control_url,
                "gateway_url": endpoints.gateway_url,
                "engine_ports": [endpoints.spec_port, endpoints.baseline_port],
            },
        )
        return cls(data_dir, stack, endpoints)

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "PYTHONUNBUFFERED": "1",
                "SPECROUTE_DATA_DIR": str(self.data_dir),
                "SPECROUTE_DATABASE_URL": f"sqlite:///{self.data_dir / 'control.db'}",
                "SPECROUTE_ADMIN_TOKEN": self.endpoints.admin_token,
                "SPECROUTE_INTERNAL_TOKEN": self.endpoints.internal_token,
                # The derived pair lives in the data dir: control must accept it.
                "SPECROUTE_MODEL_ROOTS": json.dumps(
                    [str(self.data_dir / "pair"), str(tiny_pair_dir())]
                ),
                **AUTOMATION_ENV,
            }
        )
        env.update(extra)
        return env

    def _start(self, name: str, args: list[str], **env: str) -> Child:
        child = self.stack.start(name, [*specroute_exe(), *args], self.env(**env))
        self.children[name] = child
        return child

    def migrate(self) -> None:
        log = self.data_dir / "logs" / "migrate.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as out:
            done = subprocess.run(
                [*specroute_exe(), "control", "migrate"],
                env=self.env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if done.returncode != 0:
            raise StartupError(f"migration failed; see {log}")

    def start_control(self, tick: Tick) -> None:
        port = self.endpoints.control_url.rsplit(":", 1)[1]
        child = self._start("control", ["control", "serve", "--port", port, "--no-migrate"])
        wait_http_ok(
            f"{self.endpoints.control_url}/admin/v1/pools",
            child,
            60.0,
            headers={"Authorization": f"Bearer {self.endpoints.admin_token}"},
            tick=lambda s: tick(f"control API starting ({s:.0f} s)"),
        )

    def pair_root(self) -> Path:
        """The pair the demo registers: the cost-realistic one (derived from the bundled
        pair into the data dir, a few seconds) unless `heavy_extra_layers` is 0."""
        root = tiny_pair_dir()
        if not tiny_pair_present(root):
            raise StartupError(f"the bundled tiny pair is missing under {root}")
        if self.heavy_extra_layers <= 0:
            return root
        from engine.tiny.heavy import build_heavy_pair

        return build_heavy_pair(root, self.data_dir / "pair", self.heavy_extra_layers)

    def register(
        self,
        thresholds: dict[str, Any] | None = None,
        segments: tuple[SegmentPlan, ...] = DEFAULT_SEGMENTS,
    ) -> Provisioned:
        """`thresholds`: the threshold set to register instead of the demo's. The pools
        serve the LoRA adapters that `segments` name, and none when they name none (an
        engine started with LoRA support runs its layers through the LoRA wrappers)."""
        root = self.pair_root()
        adapters = sorted({s.adapter for s in segments if s.adapter is not None})
        admin = AdminClient(self.endpoints.control_url, self.endpoints.admin_token)
        try:
            self.provisioned = provision(
                admin,
                target_dir=str(root / "target"),
                draft_dir=str(root / "draft"),
                segments=segments,
                thresholds=thresholds,
                adapter_dirs={a: str(adapter_dir(tiny_pair_dir(), a)) for a in adapters},
            )
        finally:
            admin.close()
        return self.provisioned

    def provision_control(
        self,
        tick: Tick,
        thresholds: dict[str, Any] | None = None,
        segments: tuple[SegmentPlan, ...] = DEFAULT_SEGMENTS,
    ) -> Provisioned:
        """Migrate, start the control API and register the demo (rollouts in draft)."""
        tick("migrating the SQLite database")
        self.migrate()
        self.start_control(tick)
        tick("registering the pair, pools, segments, thresholds, tenants, rollouts (draft)")
        return self.register(thresholds, segments)

    def start_serving(self, tick: Tick) -> float:
        """Start Celery, both vLLM pools and the gateway; seconds until both pools serve."""
        tick("starting Celery worker and beat, both vLLM pools")
        self.start_automation()
        self.start_engines()
        self.start_gateway(tick)
        return self.wait_pools_healthy(tick)

    def start_rollouts(self, tick: Tick, timeout_s: float = 30.0) -> None:
        """Put every rollout in canary and wait until the gateway routes on that snapshot."""
        assert self.provisioned is not None
        before = self._gateway_snapshot_version()
        admin = AdminClient(self.endpoints.control_url, self.endpoints.admin_token)
        try:
            start_rollouts(admin, self.provisioned)
        finally:
            admin.close()
        started = time.monotonic()
        while self._gateway_snapshot_version() == before:
            if time.monotonic() - started > timeout_s:
                raise StartupError(f"gateway still on snapshot {before} after {timeout_s:.0f} s")
            tick("waiting for the gateway to pick up the canary snapshot")
            time.sleep(0.3)

    def _gateway_snapshot_version(self) -> int | None:
        try:
            body = httpx.get(f"{self.endpoints.gateway_url}/readyz", timeout=5.0).json()
        except (httpx.HTTPError, ValueError):
            return None
        version = body.get("snapshot_version")
        return int(version) if version is not None else None

    def start_automation(self) -> None:
        # NOTE: solo pool: one process, no prefork child competing for the 2 cores.
        self._start("celery-worker", ["worker", "--pool", "solo", "--hostname", "demo@%h"])
        self._start("celery-beat", ["beat"])

    def stop_automation(self) -> None:
        """Beat (started last, so stopped first), then the worker, which finishes the task
        it is running (a warm shutdown): after this no decision can appear that the
        report does not show."""
        self.stack.stop_named({"celery-beat", "celery-worker"})

    def start_engines(self) -> None:
        assert self.provisioned is not None
        cores = sorted(os.sched_getaffinity(0))
        pools = (
            ("engine-spec", self.provisioned.spec_pool, self.endpoints.spec_port),
            ("engine-baseline", self.provisioned.baseline_pool, self.endpoints.baseline_port),
        )
        # Each engine gets its own pool's agent token (an enrolment bound to that pool
        # and to loopback), through the environment, never argv: processes.json
        # records every child's argv.
        tokens = self._enrol_agents([pool for _, pool, _ in pools])
        for index, (name, pool, port) in enumerate(pools):
            # NOTE: one core each, the whole server confined to it (`engine up` pins);
            # left alone, vLLM binds every engine to the same core.
            core = str(cores[index % len(cores)])
            self._start(
                name,
                [
                    "engine",
                    "up",
                    "--pool",
                    pool,
                    "--control-url",
                    self.endpoints.control_url,
                    "--base-port",
                    str(port),
                    "--heartbeat",
                    "3",
                    "--log-dir",
                    str(self.data_dir / "logs" / name),
                    "--cpu-cores",
                    core,
                ],
                SPECROUTE_AGENT_TOKEN=tokens[pool],
            )

    def _enrol_agents(self, pool_names: list[str]) -> dict[str, str]:
        admin = AdminClient(self.endpoints.control_url, self.endpoints.admin_token)
        try:
            ids = {p["name"]: p["id"] for p in admin.pools.list()}
            return {
                name: admin.call(
                    "POST",
                    f"/pools/{ids[name]}/agent-tokens",
                    json={
                        "name": f"demo-agent-{name}-{secrets.token_hex(4)}",
                        "allowed_endpoints": ["http://127.0.0.1"],
                    },
                )["token"]
                for name in pool_names
            }
        finally:
            admin.close()

    def start_gateway(self, tick: Tick) -> None:
        port = self.endpoints.gateway_url.rsplit(":", 1)[1]
        child = self._start(
            "gateway",
            ["gateway", "serve", "--port", port, "--log-level", "warning"],
            SPECROUTE_GATEWAY_CONTROL_URL=self.endpoints.control_url,
            SPECROUTE_GATEWAY_INTERNAL_TOKEN=self.endpoints.internal_token,
            **GATEWAY_ENV,
        )
        wait_http_ok(
            f"{self.endpoints.gateway_url}/readyz",
            child,
            60.0,
            tick=lambda s: tick(f"gateway starting ({s:.0f} s)"),
        )

    def wait_pools_healthy(self, tick: Tick, timeout_s: float = 420.0) -> float:
        """Until control lists a healthy worker in both pools (the spec one with its
        draft loaded): then the gateway's next snapshot can route both arms."""
        started = time.monotonic()
        headers = {"Authorization": f"Bearer {self.endpoints.admin_token}"}
        while True:
            elapsed = time.monotonic() - started
            for child in self.stack.dead_children():
                raise StartupError(
                    f"{child.name} exited with {child.process.returncode}; log tail:\n"
                    f"{child.log_tail()}"
                )
            status: dict[str, str] = {}
            try:
                pools = httpx.get(
                    f"{self.endpoints.control_url}/admin/v1/pools", headers=headers, timeout=5.0
                ).json()["items"]  # one page: the demo has two pools
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                pools = []
            ready = 0
            for pool in pools:
                good = [
                    w
                    for w in pool["workers"]
                    if w["healthy"] and (pool["pair_version_id"] is None or w["draft_loaded"])
                ]
                ready += bool(good)
                status[pool["name"]] = "serving" if good else "loading"
            if pools and ready == len(pools):
                return elapsed
            if elapsed > timeout_s:
                raise StartupError(f"pools not healthy after {timeout_s:.0f} s: {status}")
            detail = ", ".join(f"{k}: {v}" for k, v in status.items()) or "starting"
            tick(f"vLLM engines loading ({elapsed:.0f} s; ~35-60 s each) — {detail}")
            time.sleep(1.0)
