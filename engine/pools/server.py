"""One vLLM server process: start, wait until it serves, stop cleanly.

The server runs in its own session (process group) so that stopping it also
stops the engine-core process vLLM spawns; otherwise a killed API server would
leave an orphan holding the memory and the CPU.
"""

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

import httpx

from engine.pools.launcher import ServerCommand


class ServerStartError(RuntimeError):
    """The server exited or did not serve within the deadline."""


def _tail(path: Path | None, lines: int = 30) -> str:
    if path is None or not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class VllmServer:
    def __init__(self, command: ServerCommand, log_path: Path | None = None) -> None:
        self.command = command
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return self.command.base_url

    @property
    def port(self) -> int:
        return self.command.port

    @property
    def model(self) -> str:
        return self.command.served_model_name

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("ab")
        affinity = self.command.cpu_affinity

        def confine() -> None:
            # NOTE: in the child before exec, so every process vLLM spawns inherits it.
            if affinity is not None:
                os.sched_setaffinity(0, affinity)

        self.process = subprocess.Popen(
            self.command.argv,
            env=self.command.env,
            stdout=self._log if self._log is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=confine if affinity is not None else None,
        )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def serving(self, timeout: float = 2.0) -> bool:
        """True when /health answers 200 and the served model is listed."""
        try:
            health = httpx.get(f"{self.base_url}/health", timeout=timeout)
            if health.status_code != 200:
                return False
            models = httpx.get(f"{self.base_url}/v1/models", timeout=timeout)
        except httpx.HTTPError:
            return False
        if models.status_code != 200:
            return False
        return any(m.get("id") == self.model for m in models.json().get("data", []))

    def wait_ready(self, timeout: float = 180.0, poll: float = 0.5) -> float:
        """Block until the server serves; returns the seconds it took."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if not self.alive():
                code = self.process.returncode if self.process else None
                raise ServerStartError(
                    f"vLLM server on port {self.port} exited with {code}:\n{_tail(self.log_path)}"
                )
            if self.serving():
                return time.monotonic() - started
            time.sleep(poll)
        raise ServerStartError(
            f"vLLM server on port {self.port} not serving after {timeout:.0f}s:\n"
            f"{_tail(self.log_path)}"
        )

    def stop(self, grace: float = 15.0) -> int | None:
        """SIGTERM the process group, then SIGKILL whatever is left after `grace`."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            self._signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self._signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=grace)
        # NOTE: the engine core may outlive a parent that died abruptly.
        self._signal_group(proc.pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None
        return proc.returncode

    def kill(self) -> None:
        """Kill the API server process only (a crash, for tests and fault drills)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
