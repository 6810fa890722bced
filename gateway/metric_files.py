"""prometheus-client's multi-process files: the directory each gateway process
writes its samples to (`serve --workers N`, see gateway.multiprocess), emptied at
each start, and the live-gauge files of processes that are gone."""

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import values
from prometheus_client.multiprocess import mark_process_dead

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# prometheus-client's per-process files: counter_<pid>.db, gauge_livesum_<pid>.db, ...
_DB_FILE = re.compile(r"^[a-z]+(?:_[a-z]+)?_(\d+)\.db$")


@contextlib.contextmanager
def metrics_dir() -> Iterator[Path]:
    """The run's metrics directory: PROMETHEUS_MULTIPROC_DIR emptied of the last run's
    files, or a new temporary directory removed at exit."""
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for entry in path.iterdir():
            # NOTE: only prometheus-client's own files: a directory named by mistake
            # (a home, /tmp) loses nothing else.
            if _DB_FILE.match(entry.name) and entry.is_file():
                entry.unlink()
        yield path
        return
    path = Path(tempfile.mkdtemp(prefix="specroute-gateway-metrics-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def multiprocess_dir() -> Path | None:
    """The directory this process's metric values live in when prometheus-client runs in
    multi-process mode (PROMETHEUS_MULTIPROC_DIR was set when it was imported), else None.
    """
    if values.ValueClass is values.MutexValue:
        return None
    path = os.environ.get(MULTIPROC_ENV)
    return Path(path) if path else None


# prometheus-client's live-gauge files in multi-process mode: gauge_livesum_<pid>.db, ...
_LIVE_GAUGE_FILE = re.compile(r"^gauge_live[a-z]+_(\d+)\.db$")


def forget_dead_processes(path: Path) -> list[int]:
    """Remove the live-gauge files of processes that are gone (a worker uvicorn replaced),
    so their last in-flight counts do not stay in the sum; their counters stay."""
    dead: set[int] = set()
    for entry in path.iterdir():
        match = _LIVE_GAUGE_FILE.match(entry.name)
        if match is not None and not _alive(int(match.group(1))):
            dead.add(int(match.group(1)))
    for pid in dead:
        mark_process_dead(pid, str(path))  # type: ignore[no-untyped-call]
    return sorted(dead)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
