"""Is the machine busy with work that is not the demo's?

The load average cannot say: on a 2-core machine the demo's own engines, gateway,
control and client push it past 1.0 per core. `OtherWork` counts CPU seconds
instead: all the machine's busy CPU time (psutil.cpu_times) minus what the
demo's own process tree used (its live descendants, vLLM servers in their own
sessions included, plus the children it has already reaped), over the demo's
wall time. The result is how many cores other work kept busy on average; the
demo calls the machine busy when that is over a quarter of its cores.
"""

import os
import time
from dataclasses import dataclass, field

import psutil

BUSY_SHARE = 0.25


def _busy_seconds() -> float:
    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    return sum(t) - idle - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)


def _tree_seconds(root: psutil.Process, extra_pids: set[int]) -> float:
    """CPU seconds of `root`, its descendants and `extra_pids` (processes of the
    demo that left the tree, e.g. servers in their own session), reaped children
    included (their time is in their parent's children_* counters)."""
    seen: set[int] = set()
    total = 0.0
    procs = [root, *root.children(recursive=True)]
    for pid in extra_pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:
            continue
    for proc in procs:
        if proc.pid in seen:
            continue
        seen.add(proc.pid)
        try:
            c = proc.cpu_times()
        except psutil.Error:
            continue
        total += c.user + c.system + c.children_user + c.children_system
    return total


@dataclass
class OtherWork:
    """Start it before the demo starts anything; `reading()` while the stack is up."""

    started_wall: float = field(default_factory=time.monotonic)
    started_busy: float = field(default_factory=_busy_seconds)
    started_own: float = field(
        default_factory=lambda: _tree_seconds(psutil.Process(os.getpid()), set())
    )
    load_start: float = field(default_factory=lambda: os.getloadavg()[0])

    def reading(self, extra_pids: set[int] | None = None) -> dict[str, object]:
        cpus = os.cpu_count() or 1
        wall = max(time.monotonic() - self.started_wall, 1e-6)
        busy = _busy_seconds() - self.started_busy
        own = _tree_seconds(psutil.Process(os.getpid()), extra_pids or set()) - self.started_own
        other_cores = max(busy - own, 0.0) / wall
        return {
            "load_start": self.load_start,
            "load_end": os.getloadavg()[0],
            "cpus": cpus,
            "demo_cpu_s": round(own, 2),
            "other_cpu_s": round(max(busy - own, 0.0), 2),
            "demo_cores": round(own / wall, 2),
            "other_cores": round(other_cores, 2),
            "busy": other_cores > BUSY_SHARE * cpus,
        }
