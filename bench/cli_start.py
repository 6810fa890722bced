"""How fast `specroute admin` starts: `admin --help` and `admin status` against a
real control plane (started here, SQLite, --dev tokens), each run as its own
process N times, timed with time.perf_counter around subprocess.run; medians go
to bench/RESULTS.md ("CLI start").

    python -m bench.cli_start --runs 9          # writes the section
    python -m bench.cli_start --runs 5 --no-write

Targets (issue #24): `admin --help` < 0.3 s, `admin status` < 0.4 s (wall, on an
idle machine); exit 1 when a median misses one. The floor is the interpreter's
own start (`python -c pass`), measured alongside; the CPU column (the process's
user + system time) shows the command's own cost when other work shares the CPUs.
"""

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from bench.results import load_note, write_section

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
TARGETS = {"admin --help": 0.3, "admin status": 0.4}


class Runs(NamedTuple):
    wall: list[float]
    cpu: list[float]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _specroute() -> str:
    return str(Path(sys.executable).with_name("specroute"))


def _wait_ready(url: str, env: dict[str, str], deadline_s: float = 120.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        done = subprocess.run(
            [_specroute(), "admin", "status", "-o", "json"], env=env, capture_output=True
        )
        if done.returncode == 0:
            return
        time.sleep(0.5)
    raise SystemExit(f"control plane at {url} did not answer within {deadline_s:g} s")


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_runs(argv: list[str], env: dict[str, str], runs: int) -> Runs:
    """Wall seconds (perf_counter around the process) and the process's own CPU
    seconds (user + system), which other work on the machine inflates less."""
    wall, cpu = [], []
    for _ in range(runs):
        cpu_before, start = _child_cpu(), time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True)
        wall.append(time.perf_counter() - start)
        cpu.append(_child_cpu() - cpu_before)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-500:]!r}")
    return Runs(wall, cpu)


def measure(runs: int) -> dict[str, Runs]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data_dir:
        env = {
            **os.environ,
            "SPECROUTE_DATA_DIR": data_dir,
            "SPECROUTE_ADMIN_URL": url,
            "SPECROUTE_DEV_TOKENS": "1",
        }
        env.pop("SPECROUTE_ADMIN_TOKEN", None)
        server = subprocess.Popen(
            [_specroute(), "control", "serve", "--dev", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_ready(url, env)
            return {
                "python -c pass": time_runs([sys.executable, "-c", "pass"], env, runs),
                "admin --help": time_runs([_specroute(), "admin", "--help"], env, runs),
                "admin status": time_runs([_specroute(), "admin", "status"], env, runs),
            }
        finally:
            server.terminate()
            server.wait(timeout=30)


def section(results: dict[str, Runs], runs: int, load: str, when: str) -> str:
    lines = [
        "## CLI start",
        "",
        f"Command: `python -m bench.cli_start --runs {runs}` ({when}). Written by the "
        "command: each command runs as its own process, timed with time.perf_counter "
        "around subprocess.run; `admin status` asks a control plane the benchmark "
        "started (SQLite, --dev tokens, empty), so the time is start-up plus three "
        f"listings. {load}.",
        "",
        "| command | median wall s | min s | max s | median CPU s | target s (wall) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, (wall, cpu) in results.items():
        target = TARGETS.get(name)
        lines.append(
            f"| `{name}` | {statistics.median(wall):.3f} | {min(wall):.3f} | "
            f"{max(wall):.3f} | {statistics.median(cpu):.3f} | "
            f"{'-' if target is None else f'{target:g}'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--no-write", action="store_true", help="Print only.")
    args = parser.parse_args(argv)
    start = os.getloadavg()
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    results = measure(args.runs)
    text = section(results, args.runs, load_note(start, os.getloadavg()), when)
    print(text)
    if not args.no_write:
        write_section(RESULTS, text)
    missed = [
        name for name, target in TARGETS.items() if statistics.median(results[name].wall) >= target
    ]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
