"""The demo's pieces that need no engine: process clean-up on real processes, the
gateway-metrics reading on a real GatewayMetrics exposition, and the small parsers."""

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx
import psutil
import pytest

from demo.machine import OtherWork
from demo.monitor import (
    AcceptancePoint,
    DecisionEvent,
    Monitor,
    mean_acceptance_length,
    spec_counters,
)
from demo.plan import ALL_SEGMENTS, DEMO_ADAPTER, provision
from demo.processes import ProcessStack, StartupError, wait_http_ok
from demo.records import record_paths, write_records
from demo.report import acceptance_figure, acceptance_series, clip_limit, tpot_figure
from demo.stack import MARKER, DemoStack, prepare_data_dir
from demo.traffic import RequestResult, TrafficGenerator, parse_decision
from demo.view import PIPE_WIDTH, PlainLines
from engine.pools.local import tiny_pair_dir
from engine.pools.probe_prompts import CODE_PROMPTS
from engine.tiny.styles import adapter_dir, rot13
from gateway.metrics import GatewayMetrics
from gateway.telemetry.record import RequestRecord
from specwire import Arm
from specwire.admin_client import AdminClient

# A parent that, like `specroute engine up`, starts a server in a session of its own
# and prints its pid; then it waits, so only the stack's SIGTERM ends it.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                         start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""
# A parent that ignores SIGTERM: only the SIGKILL after the grace period ends it.
STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                         start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""


def _grandchild_pid(log: Path, timeout_s: float = 20.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text().strip() if log.exists() else ""
        if text:
            return int(text.splitlines()[0])
        time.sleep(0.05)
    raise AssertionError(f"no pid in {log}")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize(("script", "grace_s"), [(PARENT, 10.0), (STUBBORN, 1.0)])
def test_stop_reaches_processes_in_their_own_session(
    tmp_path: Path, script: str, grace_s: float
) -> None:
    stack = ProcessStack(tmp_path / "logs", grace_s=grace_s, manifest=tmp_path / "procs.json")
    child = stack.start("pool", [sys.executable, "-c", script], env={})
    grandchild = _grandchild_pid(child.log_path)
    # Its own session: a signal to the parent's group never reaches it.
    assert os.getsid(grandchild) != os.getsid(child.pid)
    assert '"pool"' in (tmp_path / "procs.json").read_text()

    started = time.monotonic()
    stack.stop()
    took = time.monotonic() - started
    assert _gone(child.pid)
    assert _gone(grandchild)
    assert took < grace_s + 12.0


def test_wait_http_ok_fails_fast_when_the_child_exits(tmp_path: Path) -> None:
    stack = ProcessStack(tmp_path / "logs")
    child = stack.start(
        "broken", [sys.executable, "-c", "print('boom: bad config'); raise SystemExit(3)"], env={}
    )
    started = time.monotonic()
    with pytest.raises(StartupError, match=r"broken exited with 3[\s\S]*boom: bad config"):
        wait_http_ok("http://127.0.0.1:9/never", child, timeout_s=60.0)
    assert time.monotonic() - started < 10.0
    stack.stop()


def test_prepare_data_dir_wipes_only_its_own_directory(tmp_path: Path) -> None:
    foreign = tmp_path / "precious"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(StartupError, match="not made by the demo"):
        prepare_data_dir(foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"

    ours = prepare_data_dir(tmp_path / "demo")
    (ours / "control.db").write_text("old run")
    again = prepare_data_dir(ours)
    assert sorted(p.name for p in again.iterdir()) == [MARKER]


def _record(segment: str, arm: Arm, drafts: int, accepted: int) -> RequestRecord:
    return RequestRecord(
        request_id="r",
        tenant="acme",
        segment_id=1,
        segment_name=segment,
        arm=arm,
        pair_version_id=1 if arm is Arm.SPEC else None,
        rollout_id=1,
        reason="canary",
        outcome="ok",
        http_status=200,
        prompt_tokens=5,
        completion_tokens=drafts + accepted,
        drafts=drafts,
        drafted_tokens=3 * drafts,
        accepted_tokens=accepted,
        accepted_per_position=(accepted,),
        ttft_ms=10.0,
        tpot_ms=5.0,
        e2e_ms=100.0,
        finished_at=time.time(),
    )


def test_spec_counters_read_the_gateway_exposition() -> None:
    metrics = GatewayMetrics(top_k_segments=5)
    metrics.observe_request(_record("code", Arm.SPEC, drafts=10, accepted=24))
    metrics.observe_request(_record("code", Arm.SPEC, drafts=6, accepted=8))
    metrics.observe_request(_record("prose", Arm.SPEC, drafts=4, accepted=2))
    metrics.observe_request(_record("prose", Arm.BASELINE, drafts=0, accepted=0))
    body, _ = metrics.render()
    counters = spec_counters(body.decode())
    assert counters == {"code": (16.0, 32.0), "prose": (4.0, 2.0)}
    assert mean_acceptance_length(*counters["code"]) == pytest.approx(3.0)
    assert mean_acceptance_length(0.0, 0.0) is None


def test_acceptance_series_uses_counter_deltas_per_bin() -> None:
    monitor = Monitor("http://g", "http://c", "t", {}, started_wall=0.0)
    cumulative = [(0.0, 0, 0), (5.0, 10, 20), (10.0, 20, 40), (15.0, 30, 45), (20.0, 40, 50)]
    monitor.acceptance = [AcceptancePoint(t, "code", d, a) for t, d, a in cumulative]
    xs, ys = acceptance_series(monitor, "code", bin_s=10.0)
    # 0..10 s: 40 accepted over 20 drafts; 10..20 s: 10 over 20.
    assert xs == [5.0, 15.0]
    assert ys == pytest.approx([3.0, 1.5])


def test_parse_decision_header() -> None:
    assert parse_decision("arm=spec; pair=tiny-v1; k=3; reason=canary") == {
        "arm": "spec",
        "pair": "tiny-v1",
        "k": "3",
        "reason": "canary",
    }
    assert parse_decision("arm=baseline; reason=rollout_disabled")["arm"] == "baseline"
    assert parse_decision(None) == {}


def _decision(
    id_: int, kind: str, from_state: str, to_state: str, *, has_record: bool
) -> DecisionEvent:
    return DecisionEvent(
        id=id_,
        t_s=56.0,
        segment="short-labels",
        kind=kind,
        from_state=from_state,
        to_state=to_state,
        to_percentage=0.0,
        actor="automation",
        reason="spec arm slower than baseline at matched load by more than 10%",
        has_record=has_record,
        evidence={},
    )


async def test_write_records_writes_every_control_record_in_numeric_order(
    tmp_path: Path,
) -> None:
    decisions = [
        _decision(13, "guard_low_acceptance", "probation", "disabled", has_record=True),
        _decision(8, "hold", "canary", "canary", has_record=False),
        _decision(12, "guard_latency_regression", "canary", "rolled_back", has_record=True),
    ]
    fetched: list[int] = []

    async def fetch(decision_id: int) -> str | None:
        fetched.append(decision_id)
        return f"# control record {decision_id}\n"

    paths = await write_records(tmp_path / "records", decisions, fetch)
    assert [p.name for p in paths] == [
        "decision-0012-short-labels-rolled_back.md",
        "decision-0013-short-labels-disabled.md",
    ]
    assert fetched == [12, 13]  # holds change nothing and have no record
    assert [p.read_text() for p in paths] == ["# control record 12\n", "# control record 13\n"]


def test_record_files_list_in_numeric_order(tmp_path: Path) -> None:
    for name in ("decision-20-a-full.md", "decision-0003-b-full.md", "decision-2-c-full.md"):
        (tmp_path / name).write_text("x")
    assert [p.name for p in record_paths(tmp_path)] == [
        "decision-2-c-full.md",
        "decision-0003-b-full.md",
        "decision-20-a-full.md",
    ]


# Like `engine up`: forks a "server" (in its own session) that serves --port 54329.
PORTED = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "--port", "54329"],
                         start_new_session=True)
print(child.pid, flush=True)
time.sleep(600)
"""


def test_next_run_reaps_what_a_hard_killed_run_left(tmp_path: Path) -> None:
    data_dir = prepare_data_dir(tmp_path / "demo")
    stack = ProcessStack(
        data_dir / "logs",
        manifest=data_dir / "processes.json",
        manifest_extra={"engine_ports": [54329]},
    )
    pool = stack.start("engine-spec", [sys.executable, "-c", PORTED], env={})
    server = _grandchild_pid(pool.log_path)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        # The demo was SIGKILLed: nobody called stack.stop().
        prepare_data_dir(data_dir)
        pool.process.wait(timeout=15)
        assert _gone(pool.pid)
        assert _gone(server)
        assert bystander.poll() is None, "a process the demo did not start was hit"
    finally:
        bystander.kill()
        bystander.wait()
        pool.log_file.close()


async def test_traffic_counts_every_arrival_even_when_nothing_answers() -> None:
    # A closed port: every request fails at connect, and each one is still a result.
    segment = replace(ALL_SEGMENTS[0], rate_per_s=40.0, max_in_flight=1000)
    gen = TrafficGenerator("http://127.0.0.1:9", {segment.tenant: "k"}, [segment], model="tiny")
    results = await gen.run(1.0, drain_s=10.0)
    counters = gen.counters[segment.name]
    # Poisson(40) arrivals in 1 s: far outside [15, 70] has probability < 1e-5.
    assert 15 <= counters.sent <= 70, counters
    assert len(results) == counters.sent and counters.in_flight == 0
    assert {(r.status, r.error, r.arm) for r in results} == {(0, "APIConnectionError", None)}
    assert all(not r.ok for r in results)


ARMS = ("spec", "baseline")


def _result(seg: str, arm: str, t: float, tpot_ms: float) -> RequestResult:
    return RequestResult(seg, t, arm, "canary", 200, None, 32, 0.05, tpot_ms / 1000.0, 0.5)


def test_tpot_panel_clips_single_outliers_and_says_so() -> None:
    results = [_result("code", arm, float(i), 10.0 + i % 3) for i in range(60) for arm in ARMS]
    results.append(_result("code", "spec", 30.0, 600.0))
    monitor = Monitor("http://g", "http://c", "t", {}, started_wall=0.0)
    monitor.decisions = [
        replace(_decision(3, "promote", "canary", "ramping", has_record=True), segment="code")
    ]
    fig = tpot_figure(results, monitor, ["code"])
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    assert low == 0.0 and 12.0 < high < 20.0  # the medians stay readable, not 0..600 ms
    assert "clipped at p98" in ax.get_title() and "(1 above)" in ax.get_title()
    legend = ax.get_legend()
    assert legend is not None
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["spec (rolling median)", "baseline (rolling median)", "rollout state change"]
    # Outside the panel, right of it: it can hide neither points nor state labels.
    assert legend.get_bbox_to_anchor().x0 > ax.get_window_extent().x1
    assert clip_limit([10.0] * 30) is None  # nothing sticks out: no clipping


def test_acceptance_panel_legend_names_every_line() -> None:
    monitor = Monitor("http://g", "http://c", "t", {}, started_wall=0.0)
    cumulative = [(0.0, 0, 0), (20.0, 10, 20), (40.0, 20, 40)]
    monitor.acceptance = [AcceptancePoint(t, "code", d, a) for t, d, a in cumulative]
    fig = acceptance_figure(monitor, ["code"], bin_s=15.0, k=3)
    legend = fig.axes[0].get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == [
        "spec arm",
        "baseline arm (1 token / pass)",
        "ceiling k + 1 = 4",
    ]


def test_the_demo_serves_the_cost_realistic_pair_unless_told_otherwise(tmp_path: Path) -> None:
    import json

    from demo.command import machine_load
    from demo.stack import DemoStack
    from engine.pools.local import tiny_pair_dir

    stack = DemoStack.create(tmp_path)
    assert stack.pair_root() == tiny_pair_dir()  # the default of the dataclass: as shipped
    stack.heavy_extra_layers = 2
    root = stack.pair_root()
    assert root == tmp_path / "pair"
    config = json.loads((root / "target" / "config.json").read_text())
    assert config["num_hidden_layers"] == 4 + 2
    assert (root / "draft" / "config.json").is_file()

    machine = machine_load(OtherWork(load_start=123.0))
    assert machine["load_start"] == 123.0 and machine["cpus"] == os.cpu_count()
    assert isinstance(machine["load_end"], float) and isinstance(machine["busy"], bool)


# A fixed amount of CPU work (not a fixed time), so a loaded machine only slows it.
SPIN = "sum(i * i for i in range(4_000_000))"
# Started in its own session by a parent that exits at once: the spinner is then no
# descendant of the test, like another user's job.
ORPHAN = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {SPIN!r}], start_new_session=True)
print(child.pid, flush=True)
"""


def test_the_busy_check_counts_other_processes_cpu_not_the_demos() -> None:
    own = OtherWork()
    before = psutil.Process().cpu_times()
    subprocess.run([sys.executable, "-c", SPIN], check=True)  # the demo's own work
    mine = own.reading()
    after = psutil.Process().cpu_times()
    spun = after.children_user - before.children_user  # what that child cost
    assert float(mine["demo_cpu_s"]) >= 0.8 * spun > 0.05  # type: ignore[arg-type]

    other = OtherWork()
    started = subprocess.run([sys.executable, "-c", ORPHAN], capture_output=True, text=True)
    orphan = int(started.stdout.strip())
    deadline = time.monotonic() + 120
    while psutil.pid_exists(orphan) and psutil.Process(orphan).status() != "zombie":
        assert time.monotonic() < deadline, "the spinner did not finish"
        time.sleep(0.05)
    reading = other.reading()
    # The orphan's CPU time (about `spun`) is other work; only its short-lived parent
    # is the test's own.
    assert float(reading["other_cpu_s"]) >= 0.5 * spun  # type: ignore[arg-type]
    assert float(reading["demo_cpu_s"]) < 0.5 * spun  # type: ignore[arg-type]


def test_piped_progress_is_plain_timestamped_lines_that_nothing_cuts() -> None:
    import io
    import re

    from rich.console import Console

    segment = ALL_SEGMENTS[0]
    gen = TrafficGenerator("http://127.0.0.1:9", {segment.tenant: "k"}, [segment], model="tiny")
    monitor = Monitor("http://g", "http://c", "t", {}, started_wall=0.0)
    long_reason = "speedup 0.836, always-valid upper bound 0.958 < min_speedup 1.000; " * 4
    monitor.decisions.append(
        replace(
            _decision(3, "canary_no_benefit", "canary", "rolled_back", has_record=True),
            reason=long_reason,
        )
    )
    out = io.StringIO()
    plain = PlainLines(Console(file=out, width=PIPE_WIDTH, soft_wrap=True), 240.0)
    plain.update(gen, monitor)
    plain.update(gen, monitor)  # within PLAIN_EVERY_S: the decision is not repeated
    plain.update(gen, monitor, final=True)
    lines = out.getvalue().splitlines()
    stamped = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ")
    assert lines and all(stamped.match(line) for line in lines), lines
    decisions = [line for line in lines if " decision #3 " in line]
    assert len(decisions) == 1 and long_reason.strip() in decisions[0]
    per_segment = [line for line in lines if f" {segment.name}: sent " in line]
    assert len(per_segment) == 2  # the first update and the final one
    assert "\x1b[" not in out.getvalue()  # no cursor movement or colour codes


def test_the_demo_serves_its_adapter_segment_on_both_pools(tmp_path: Path) -> None:
    stack = DemoStack.create(prepare_data_dir(tmp_path / "run"))
    try:
        stack.migrate()
        stack.start_control(lambda _message: None)
        plan = stack.register(segments=ALL_SEGMENTS)
        admin = httpx.Client(
            base_url=f"{stack.endpoints.control_url}/admin/v1",
            headers={"Authorization": f"Bearer {stack.endpoints.admin_token}"},
        )
        with admin:
            pools = admin.get("/pools").json()["items"]
            segments = {s["name"]: s for s in admin.get("/segments").json()["items"]}
    finally:
        stack.stack.stop()
    adapter_path = adapter_dir(tiny_pair_dir(), DEMO_ADAPTER)
    assert (adapter_path / "adapter_config.json").is_file()
    assert {p["name"]: p["engine_args"]["lora-modules"] for p in pools} == {
        plan.spec_pool: [f"{DEMO_ADAPTER}={adapter_path}"],
        plan.baseline_pool: [f"{DEMO_ADAPTER}={adapter_path}"],
    }
    assert segments["cipher-adapter"]["selector"]["adapters"] == [DEMO_ADAPTER]
    assert segments["code-completion"]["selector"]["adapters"] is None
    # Its requests name the adapter as their model, in the adapter's tenant's style.
    cipher = next(s for s in ALL_SEGMENTS if s.adapter == DEMO_ADAPTER)
    assert cipher.prompts[0] == rot13(CODE_PROMPTS[0]) != CODE_PROMPTS[0]


def test_an_adapter_segment_needs_the_adapters_directory() -> None:
    with pytest.raises(ValueError, match="rot13"):
        provision(
            AdminClient("http://127.0.0.1:9", "unused"),
            target_dir="t",
            draft_dir="d",
            segments=ALL_SEGMENTS,
        )
