"""`specroute demo` end to end: a real stack (control, Celery on SQLite, two CPU vLLM
pools, gateway) driven by real traffic, then checked by what it left behind.

The demo starts its own engines, so nothing here shares the session vLLM fixtures.
"""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import itertools

import matplotlib.image as mpimg
import psutil
import pytest

from demo.plan import ALL_SEGMENTS
from engine.pools.local import tiny_pair_present

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

SPECROUTE = [str(Path(sys.executable).parent / "specroute")]


def _require_pair() -> None:
    if not tiny_pair_present():
        pytest.skip("bundled tiny pair missing")


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}


def _processes_left(manifest: dict[str, object]) -> list[str]:
    """The demo's children that still run, and any process serving one of its engine ports."""
    pids = {int(c["pid"]) for c in manifest["children"]}  # type: ignore[attr-defined]
    ports = {str(p) for p in manifest["engine_ports"]}  # type: ignore[attr-defined]
    left: list[str] = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        info = proc.info
        if info["status"] == psutil.STATUS_ZOMBIE:
            continue
        cmdline = info["cmdline"] or []
        serves_port = any(a == "--port" and b in ports for a, b in itertools.pairwise(cmdline))
        if info["pid"] in pids or serves_port:
            left.append(f"{info['pid']}: {' '.join(cmdline)[:200]}")
    return left


def test_short_demo_decides_reports_and_leaves_no_process(tmp_path: Path) -> None:
    _require_pair()
    data_dir = tmp_path / "demo"
    started = time.monotonic()
    done = subprocess.run(
        [*SPECROUTE, "demo", "--duration", "60", "--adapter-segment", "--data-dir", str(data_dir)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=480,
        check=False,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, f"rc {done.returncode} after {took:.0f} s:\n{done.stdout[-4000:]}"

    manifest = json.loads((data_dir / "processes.json").read_text())
    names = {c["name"] for c in manifest["children"]}
    assert {"control", "celery-worker", "celery-beat", "engine-spec", "engine-baseline"} <= names
    assert _processes_left(manifest) == []
    # Secrets travel by environment, never in the recorded command lines.
    argv = " ".join(a for c in manifest["children"] for a in c["argv"])
    assert "demo-internal-" not in argv and "demo-admin-" not in argv

    report = data_dir / "report"
    for png in ("acceptance.png", "tpot.png"):
        image = mpimg.imread(report / png)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 400, image.shape
        assert image.std() > 0.01, f"{png} is blank"

    summary = json.loads((report / "summary.json").read_text())
    by_segment = {s["segment"]: s for s in summary["segments"]}
    # Every segment was served, the one whose requests name the rot13 LoRA adapter too.
    assert set(by_segment) == {s.name for s in ALL_SEGMENTS}
    assert "cipher-adapter" in by_segment
    for name, seg in by_segment.items():
        assert seg["requests"] > 0 and seg["ok"] > 0, (name, seg)
    served = sum(s["spec_requests"] for s in by_segment.values())
    assert served > 0, "no request reached the spec arm"
    assert any(s["mean_acceptance_length"] for s in by_segment.values()), by_segment

    with sqlite3.connect(data_dir / "control.db") as db:
        automated = db.execute(
            "SELECT id, from_state, to_state, record_markdown FROM decisions "
            "WHERE actor = 'automation'"
        ).fetchall()
    assert automated, "the automation recorded no decision"
    # Every automated state change, and every record the control plane holds, is a file;
    # a control record is written verbatim.
    files = {int(p.name.split("-")[1]): p for p in (data_dir / "records").glob("decision-*.md")}
    for decision_id, from_state, to_state, markdown in automated:
        if from_state != to_state or markdown is not None:
            assert decision_id in files, (decision_id, from_state, to_state)
            text = files[decision_id].read_text()
            assert text == markdown if markdown is not None else text.startswith("# ")
    assert "per-segment outcome" in done.stdout


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_engine_start_stops_everything(tmp_path: Path) -> None:
    _require_pair()
    data_dir = tmp_path / "demo"
    proc = subprocess.Popen(
        [*SPECROUTE, "demo", "--duration", "60", "--data-dir", str(data_dir)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # NOTE: a shell's background job (`make test &`) starts with SIGINT ignored, which
        # the demo would inherit; Ctrl-C must reach it as it does from a terminal.
        preexec_fn=_default_sigint,
    )
    manifest_path = data_dir / "processes.json"
    server_logs = data_dir / "logs" / "engine-spec"
    deadline = time.monotonic() + 300
    # Interrupt once `engine up` has forked its vLLM server (in a session of its own, so
    # only the demo's descendant sweep can reach it) and while that server still loads.
    while not any(server_logs.glob("worker-*.log")):
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the demo never started a vLLM server")
        time.sleep(0.5)
    time.sleep(2)
    manifest = json.loads(manifest_path.read_text())
    assert any("vllm" in p for p in _processes_left(manifest)), "no vLLM server to clean up"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out[-3000:]
    assert "interrupted" in out
    assert _processes_left(json.loads(manifest_path.read_text())) == []
