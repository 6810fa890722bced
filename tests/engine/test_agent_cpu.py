"""The CPU seconds a heartbeat carries: the whole process tree, never going back."""

import subprocess
import sys
import time

import httpx

from engine.agent import WorkerProbe
from engine.agent.memory import process_tree_cpu_seconds
from tests.fixtures.vllm import free_port

BURN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"


def test_cpu_seconds_count_the_children_and_stay_monotonic() -> None:
    # A parent that sleeps while its child burns 0.3 s of CPU: only the tree sees it.
    child = (
        f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BURN.format(s=0.3)!r}])"
    )
    parent = subprocess.Popen([sys.executable, "-c", child + "; import time; time.sleep(30)"])
    try:
        probe = WorkerProbe(
            1, f"http://127.0.0.1:{free_port()}", speculative=False, pid=lambda: parent.pid
        )
        with httpx.Client() as http:
            first = probe.beat(http)
            assert first.cpu_seconds is not None
            deadline = time.monotonic() + 20
            while (probe.beat(http).cpu_seconds or 0.0) < 0.3 and time.monotonic() < deadline:
                time.sleep(0.05)
            second = probe.beat(http)
        # The reaped child's time moved into the parent's children_* times.
        assert second.cpu_seconds is not None and second.cpu_seconds >= 0.3
        assert second.cpu_seconds >= first.cpu_seconds
        assert not second.healthy  # nothing serves on that port; the CPU is measured anyway
        # A reading lower than one already reported is not reported (a child caught
        # exiting drops out of one reading).
        probe._cpu_high = (parent.pid, second.cpu_seconds + 100.0)
        assert probe._cpu_seconds(parent.pid) == second.cpu_seconds + 100.0
    finally:
        parent.kill()
        parent.wait()
    assert process_tree_cpu_seconds(parent.pid) is None
