"""Pid files of a hand-run stack, so one command stops what several terminals
started (`specroute stack down`).

Each long-running command (`control serve`, `gateway serve`, `engine up`,
`worker`, `beat`) started from the `specroute` script writes
`<run dir>/<name>-<pid>.json` (pid, command line, start time) and removes it
when it exits; the run dir is SPECROUTE_RUN_DIR, `data/run` under the working
directory by default. A file whose process is gone, or whose pid now belongs to
another command line (a recycled pid), is stale: it is removed, never signalled.
"""

import atexit
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

RUN_DIR_ENV = "SPECROUTE_RUN_DIR"
DEFAULT_RUN_DIR = Path("data/run")
# (group, command) -> the name its pid file gets; the order `stack down` stops them in.
SERVICES: dict[tuple[str, ...], str] = {
    ("gateway", "serve"): "gateway",
    ("beat",): "beat",
    ("worker",): "worker",
    ("engine", "up"): "engine",
    ("control", "serve"): "control",
}


def run_dir() -> Path:
    return Path(os.environ.get(RUN_DIR_ENV) or DEFAULT_RUN_DIR)


def service_of(argv: list[str]) -> str | None:
    """The service a `specroute ...` command line starts, if any (options skipped)."""
    words = [a for a in argv if not a.startswith("-")][:2]
    for key, name in SERVICES.items():
        if tuple(words[: len(key)]) == key:
            return name
    return None


def register(name: str, directory: Path | None = None) -> Path:
    """Write this process's pid file; removed again at exit."""
    import psutil

    directory = directory or run_dir()
    directory.mkdir(parents=True, exist_ok=True)
    me = psutil.Process()
    path = directory / f"{name}-{me.pid}.json"
    doc = {"name": name, "pid": me.pid, "cmdline": me.cmdline(), "started": me.create_time()}
    path.write_text(json.dumps(doc))

    def remove() -> None:
        path.unlink(missing_ok=True)

    atexit.register(remove)
    return path


def register_from_argv() -> None:
    """Called by the `specroute` root command: a pid file when it starts a service."""
    if not Path(sys.argv[0]).name.startswith("specroute"):
        return
    name = service_of(sys.argv[1:])
    if name is not None and "--help" not in sys.argv:
        register(name)


@dataclass(frozen=True)
class Entry:
    path: Path
    name: str
    pid: int
    cmdline: list[str]
    started: float

    def running(self) -> bool:
        """The very process that wrote the file (same pid, start time, command line)."""
        import psutil

        try:
            proc = psutil.Process(self.pid)
            return (
                proc.status() != psutil.STATUS_ZOMBIE
                and abs(proc.create_time() - self.started) < 1.0
                and proc.cmdline() == self.cmdline
            )
        except psutil.Error:
            return False


def entries(directory: Path | None = None) -> list[Entry]:
    """Every readable pid file, in the order `stack down` stops them."""
    order = list(SERVICES.values())
    found = []
    for path in (directory or run_dir()).glob("*.json"):
        try:
            doc = json.loads(path.read_text())
            found.append(
                Entry(
                    path,
                    str(doc["name"]),
                    int(doc["pid"]),
                    [str(a) for a in doc["cmdline"]],
                    float(doc["started"]),
                )
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
    rank = {name: i for i, name in enumerate(order)}
    return sorted(found, key=lambda e: (rank.get(e.name, len(order)), e.pid))
