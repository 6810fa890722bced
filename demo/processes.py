"""The demo's child processes: start each in its own process group, stop them all.

Every child runs in a new session, so one `killpg` reaches the uvicorn/Celery
workers it forks. `specroute engine up` starts its vLLM servers in sessions of
their own (so a pool can stop its servers without stopping itself); a SIGTERM
to the pool lets it stop them, but a pool that has to be SIGKILLed cannot.
So before stopping anything the stack snapshots every descendant of every
child (psutil), and after the groups are gone it kills whatever of that
snapshot is still alive: no orphan vLLM engine survives the demo.
"""

import contextlib
import itertools
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx
import psutil


class StartupError(RuntimeError):
    """A child exited or did not become ready in time."""


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes]
    log_file: IO[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class ProcessStack:
    """Children started in order and stopped in reverse order."""

    log_dir: Path
    grace_s: float = 20.0
    manifest: Path | None = None  # JSON of every child's pid, rewritten at each start
    manifest_extra: dict[str, object] = field(default_factory=dict)
    children: list[Child] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> Child:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        log_file = log_path.open("ab")
        process = subprocess.Popen(
            argv,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        child = Child(name, argv, log_path, process, log_file)
        self.children.append(child)
        self._write_manifest()
        return child

    def _write_manifest(self) -> None:
        # NOTE: lets an operator (or a test) find every process after a hard crash.
        if self.manifest is None:
            return
        doc = {
            **self.manifest_extra,
            "children": [{"name": c.name, "pid": c.pid, "argv": c.argv} for c in self.children],
        }
        self.manifest.write_text(json.dumps(doc, indent=2))

    def descendants(self) -> set[int]:
        """Every live process below the children (vLLM servers in their own sessions too)."""
        pids: set[int] = set()
        for child in self.children:
            with contextlib.suppress(psutil.Error):
                pids.update(p.pid for p in psutil.Process(child.pid).children(recursive=True))
        return pids

    def dead_children(self) -> list[Child]:
        return [c for c in self.children if not c.alive()]

    def stop_named(self, names: set[str]) -> None:
        """Stop these children now (newest first); the rest keep running."""
        for child in reversed(self.children):
            if child.name in names:
                _stop_group(child.process, self.grace_s)
                child.log_file.close()

    def stop(self, on_stop: Callable[[str], None] | None = None) -> None:
        """SIGTERM each group (newest first), SIGKILL after the grace period, then reap
        the descendants seen before stopping. Safe to call twice."""
        leftovers = self.descendants()
        for child in reversed(self.children):
            if on_stop is not None and child.alive():
                on_stop(child.name)
            _stop_group(child.process, self.grace_s)
            child.log_file.close()
        _kill_survivors(leftovers, self.grace_s)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _stop_group(process: subprocess.Popen[bytes], grace_s: float) -> None:
    if process.poll() is None:
        _signal_group(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(process.pid, signal.SIGKILL)
            process.wait(timeout=grace_s)
    # NOTE: the leader may be gone while forked members of its group linger.
    _signal_group(process.pid, signal.SIGKILL)


def _kill_survivors(pids: set[int], grace_s: float = 10.0) -> None:
    procs: list[psutil.Process] = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace_s)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=grace_s)


def wait_http_ok(
    url: str,
    child: Child,
    timeout_s: float,
    *,
    headers: dict[str, str] | None = None,
    tick: Callable[[float], None] | None = None,
) -> float:
    """Poll `url` until it answers 2xx; fail early when `child` exits. Returns seconds."""
    started = time.monotonic()
    while True:
        elapsed = time.monotonic() - started
        if not child.alive():
            raise StartupError(
                f"{child.name} exited with {child.process.returncode}; log tail:\n"
                f"{child.log_tail()}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, headers=headers, timeout=2.0).is_success:
                return elapsed
        if elapsed > timeout_s:
            raise StartupError(
                f"{child.name} not ready at {url} after {timeout_s:.0f} s; log tail:\n"
                f"{child.log_tail()}"
            )
        if tick is not None:
            tick(elapsed)
        time.sleep(0.5)


def reap_manifest(manifest: Path) -> list[int]:
    """Stop what a previous run that died hard (SIGKILL, power loss of the terminal)
    left behind: its children, matched by pid *and* command line so a recycled pid is
    never hit, and any process serving one of its engine ports. Returns the pids."""
    try:
        doc = json.loads(manifest.read_text())
    except (OSError, ValueError):
        return []
    argvs = {int(c["pid"]): c["argv"] for c in doc.get("children", [])}
    ports = {str(p) for p in doc.get("engine_ports", [])}
    found: set[int] = set()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline: list[str] = proc.info["cmdline"] or []
        serves_port = any(a == "--port" and b in ports for a, b in itertools.pairwise(cmdline))
        if argvs.get(proc.info["pid"]) == cmdline or serves_port:
            found.add(proc.info["pid"])
    _kill_survivors(found)
    return sorted(found)
