"""Memory and CPU time held by a server's process tree (the API server plus its engine
core and workers)."""

import shutil
import subprocess

import psutil


def process_tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def process_tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants (0 when it is gone)."""
    total = 0
    for proc in process_tree(pid):
        try:
            total += proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


def process_tree_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds `pid` and all its descendants have used, including
    descendants they already reaped; None when `pid` is gone."""
    tree = process_tree(pid)
    if not tree:
        return None
    total = 0.0
    for proc in tree:
        try:
            t = proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def gpu_memory_bytes(pids: set[int]) -> int | None:
    """GPU memory used by these processes, or None on a machine without NVIDIA GPUs."""
    smi = shutil.which("nvidia-smi")
    if smi is None or not pids:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    used_mib = 0
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) in pids:
            used_mib += int(parts[1]) if parts[1].isdigit() else 0
    return used_mib * 1024 * 1024
