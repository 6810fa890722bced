"""A `specroute beat` (or `specroute worker`) process for the tests: started with its
output piped, read until it logs that it started ("beat: Starting", a worker's
"ready."), stopped with SIGTERM while its pipe is drained (a process that writes
into a pipe nobody reads blocks once the pipe is full)."""

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SPECROUTE = str(Path(sys.executable).parent / "specroute")


@contextmanager
def celery_process(
    env: dict[str, str], cwd: Path, command: str = "beat"
) -> Iterator["subprocess.Popen[str]"]:
    """`specroute beat` (or `command`), killed at the end if it is still running."""
    proc = subprocess.Popen(
        [SPECROUTE, command],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)


def read_until_started(
    proc: "subprocess.Popen[str]", timeout_s: float = 60.0, marker: str = "beat: Starting"
) -> list[str]:
    """The non-blank lines the process wrote up to and including `marker`."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    while not any(marker in line for line in lines):
        assert time.monotonic() < deadline, lines
        line = proc.stdout.readline()
        assert line or proc.poll() is None, lines
        if line.strip():
            lines.append(line)
    return lines


def terminate(proc: "subprocess.Popen[str]", timeout_s: float) -> str:
    """SIGTERM, then what beat writes until it exits (within `timeout_s`, else
    subprocess.TimeoutExpired)."""
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=timeout_s)
    return rest


def stop_after_start(
    proc: "subprocess.Popen[str]", delay_s: float, bound_s: float, marker: str = "beat: Starting"
) -> tuple[str, float]:
    """Read until `marker`, wait `delay_s`, SIGTERM: all the process wrote, and the
    seconds from the signal to its exit (within `bound_s`)."""
    lines = read_until_started(proc, marker=marker)
    time.sleep(delay_s)
    signalled = time.monotonic()
    rest = terminate(proc, bound_s)
    return "".join(lines) + rest, time.monotonic() - signalled
