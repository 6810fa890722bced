"""`specroute stack status|down`: the processes of a hand-run stack, from their
pid files (control/cli/pidfiles.py), whichever terminal started them."""

import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from control.cli.pidfiles import RUN_DIR_ENV, Entry, entries, run_dir

if TYPE_CHECKING:
    import psutil

app = typer.Typer(
    help="A hand-run stack's processes: list them, stop them all.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
RunDirOption = typer.Option(
    None, "--run-dir", envvar=RUN_DIR_ENV, help="Where the pid files are (default data/run)."
)


def _describe(entry: Entry) -> str:
    """`control (pid 42): specroute control serve --port 8000` (the interpreter and
    the script's directory left out)."""
    words = entry.cmdline
    for i, word in enumerate(words):
        if Path(word).name == "specroute":
            words = ["specroute", *words[i + 1 :]]
            break
    return f"{entry.name} (pid {entry.pid}): {' '.join(words)}"


def _wait_gone(procs: "list[psutil.Process]", timeout: float) -> "list[psutil.Process]":
    """Those still running after `timeout` s. A zombie is gone: it has exited and
    waits only for its parent (the terminal's shell) to read its status."""
    import psutil

    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for proc in procs:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except psutil.NoSuchProcess:
                continue
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


@app.command("status")
def status(directory: Path | None = RunDirOption) -> None:
    """The stack's processes: running, or stale (their pid file outlived them)."""
    found = entries(directory or run_dir())
    if not found:
        typer.echo(f"no pid files under {directory or run_dir()}")
    for entry in found:
        typer.echo(f"{'running' if entry.running() else 'stale  '} {_describe(entry)}")


@app.command("down")
def down(
    directory: Path | None = RunDirOption,
    timeout: float = typer.Option(
        30.0, min=0.0, help="Seconds each process gets to stop after SIGTERM before SIGKILL."
    ),
) -> None:
    """Stop every process of the stack: the gateway first, control last. Each gets
    SIGTERM (engine agents stop their vLLM servers, the worker finishes its task),
    then SIGKILL after --timeout, as do descendants it left behind."""
    import psutil

    found = entries(directory or run_dir())
    if not found:
        typer.echo(f"nothing to stop: no pid files under {directory or run_dir()}")
    failed = False
    for entry in found:
        if not entry.running():
            entry.path.unlink(missing_ok=True)
            typer.echo(f"not running (stale pid file removed): {_describe(entry)}")
            continue
        proc = psutil.Process(entry.pid)
        family = [proc, *proc.children(recursive=True)]
        proc.terminate()
        alive = _wait_gone([proc], timeout)
        for left in alive:
            left.kill()
        # What it started and left behind (e.g. a server in its own session).
        rest = _wait_gone(family[1:], 0.0)
        for p in rest:
            p.terminate()
        stubborn = _wait_gone(rest, min(timeout, 10.0))
        for p in stubborn:
            p.kill()
        failed = failed or bool(_wait_gone(alive + stubborn, 5.0))
        entry.path.unlink(missing_ok=True)
        how = "stopped" if not alive else "killed (did not stop on SIGTERM)"
        typer.echo(f"{how}: {_describe(entry)}")
    if failed:
        raise typer.Exit(code=1)
