"""The policy-vs-static harness: the oracle's choice, convergence, the statistics and
the report, on results shaped like a real run's (demo.traffic.RequestResult and the
automation's decisions as demo.monitor reads them), with numbers worked by hand."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench import policy as p
from bench.cli import app
from bench.policy_cli import SECTION, report_lines
from bench.policy_plot import plot_segments
from bench.results import write_section
from demo.monitor import DecisionEvent
from demo.traffic import RequestResult

SEGMENTS = ["code", "labels"]


def _req(
    segment: str,
    t: float,
    arm: str,
    tokens: int,
    e2e_s: float,
    ttft_s: float = 0.05,
    status: int = 200,
) -> RequestResult:
    tpot = (e2e_s - ttft_s) / (tokens - 1) if tokens > 1 else None
    error = None if status == 200 else "http_503"
    return RequestResult(
        segment, t, arm, "override_header", status, error, tokens, ttft_s, tpot, e2e_s
    )


def _phase(
    code_ms: float, labels_ms: float, *, code_arm: str, labels_arm: str
) -> list[RequestResult]:
    """Ten code requests (48 tokens) and ten label requests (2 tokens), one every 10 s."""
    return [
        *(_req("code", 10.0 * i, code_arm, 48, 48 * code_ms / 1000) for i in range(10)),
        *(_req("labels", 10.0 * i + 5, labels_arm, 2, 2 * labels_ms / 1000) for i in range(10)),
    ]


def _flip(
    t: float, segment: str, kind: str, to_state: str, actor: str = "automation"
) -> DecisionEvent:
    return DecisionEvent(
        id=int(t),
        t_s=t,
        segment=segment,
        kind=kind,
        from_state="canary",
        to_state=to_state,
        to_percentage=100.0 if to_state == "full" else 0.0,
        actor=actor,
        reason=f"{kind} at {t:g} s",
        has_record=True,
        evidence={},
    )


BASE = _phase(60.0, 40.0, code_arm="baseline", labels_arm="baseline")
SPEC = _phase(25.0, 50.0, code_arm="spec", labels_arm="spec")


def test_the_oracle_takes_the_faster_static_arm_per_segment() -> None:
    choices = p.oracle_arms(SEGMENTS, BASE, SPEC)
    assert [(c.segment, c.arm) for c in choices] == [("code", "spec"), ("labels", "baseline")]
    assert choices[0].baseline_ms == pytest.approx(60.0)
    assert choices[0].spec_ms == pytest.approx(25.0)
    assert choices[1].spec_ms == pytest.approx(50.0)
    # A tie, or a segment one phase did not serve, stays on the baseline.
    tie = p.oracle_arms(["code"], BASE, _phase(60.0, 1.0, code_arm="spec", labels_arm="spec"))
    assert tie[0].arm == "baseline"
    missing = p.oracle_arms(["code"], BASE, [r for r in SPEC if r.segment != "code"])
    assert missing[0].arm == "baseline" and missing[0].spec_ms is None
    assert p.override_headers({c.segment: c.arm for c in choices}) == {
        "code": {"x-specroute-speculation": "on"},
        "labels": {"x-specroute-speculation": "off"},
    }


def test_convergence_is_the_last_automated_flip_within_the_phase() -> None:
    decisions = [
        _flip(-1.0, "code", "start", "canary", actor="admin:demo"),  # the start, not a flip
        _flip(40.0, "code", "hold", "canary"),  # a hold keeps the state
        _flip(80.0, "code", "canary_promote", "full"),
        _flip(150.0, "labels", "no_benefit", "paused"),
        _flip(260.0, "labels", "rollback", "rolled_back"),  # after the traffic ended
    ]
    conv = p.convergence(decisions, SEGMENTS, duration_s=240.0)
    assert conv.last_flip_s == 150.0
    assert [d.t_s for d in conv.flips] == [80.0, 150.0]
    assert conv.states == {"code": "full", "labels": "paused"}
    assert conv.converged and conv.describe() == "last flip at 150 s; every segment settled"

    waiting = p.convergence(decisions[:3], SEGMENTS, duration_s=240.0)
    assert waiting.last_flip_s == 80.0 and not waiting.converged
    assert waiting.unsettled == {"labels": "canary"}
    assert waiting.describe() == "last flip at 80 s; not converged: labels still canary"

    nothing = p.convergence(decisions[:2], SEGMENTS, duration_s=240.0)
    assert nothing.last_flip_s is None and not nothing.converged
    assert "did not converge" in nothing.describe()


def test_segment_and_fleet_statistics_over_a_window() -> None:
    rows = [
        *(
            _req("code", float(t), "spec", 10, e2e, ttft_s=ttft)
            for t, e2e, ttft in [(0, 1.0, 0.1), (10, 0.5, 0.2), (20, 0.2, 0.3), (30, 0.3, 0.4)]
        ),
        _req("code", 15.0, "baseline", 10, 2.0),
        _req("code", 25.0, None, 0, 0.01, ttft_s=0.0, status=503),  # type: ignore[arg-type]
        _req("labels", 12.0, "spec", 2, 0.2),
    ]
    s = p.segment_stats(rows, "code", 10.0, 40.0)
    # In [10, 40): e2e/token 50, 200, 20, 30 ms; one failure.
    assert (s.ok, s.failed) == (4, 1)
    assert s.spec_share == pytest.approx(0.75)
    assert s.e2e_per_token_mean_ms == pytest.approx(75.0)
    assert s.e2e_per_token_p50_ms == pytest.approx(50.0)  # sorted 20, 30, 50, 200: index 2
    assert s.e2e_per_token_p99_ms == pytest.approx(200.0)
    assert s.ttft_p50_ms == pytest.approx(300.0) and s.ttft_p99_ms == pytest.approx(400.0)

    fleet = p.fleet_stats(rows, 10.0, 40.0)
    # 5 served requests, 42 tokens, 0.5 + 2.0 + 0.2 + 0.3 + 0.2 = 3.2 s over 30 s.
    assert (fleet.ok, fleet.tokens) == (5, 42)
    assert fleet.tokens_per_s == pytest.approx(42 / 30)
    assert fleet.ms_per_token == pytest.approx(3200 / 42)
    empty = p.fleet_stats(rows, 100.0, 110.0)
    assert empty.ms_per_token is None and empty.tokens_per_s == 0.0


def _four_phases() -> dict[str, list[RequestResult]]:
    # specroute: code on the baseline until its promotion at 40 s, then like the oracle.
    mine = [
        r
        if r.segment == "labels" or r.started_s >= 40.0
        else _req("code", r.started_s, "baseline", 48, 48 * 0.06)
        for r in _phase(25.0, 40.0, code_arm="spec", labels_arm="baseline")
    ]
    return {
        p.BASELINE: BASE,
        p.SPECULATION: SPEC,
        p.SPECROUTE: mine,
        p.ORACLE: _phase(25.0, 40.0, code_arm="spec", labels_arm="baseline"),
    }


def test_goal_lines_judge_the_fleet_time_per_token() -> None:
    phases = _four_phases()
    after = p.goal_lines(phases, 40.0, 100.0)
    assert len(after) == 3
    assert all("**met**" in line for line in after), after
    assert "1.000x" in after[2]
    whole = p.goal_lines(phases, 0.0, 100.0)
    # Over the whole phase, code's 40 s on the baseline put specroute 52 % behind the oracle.
    assert "**met**" in whole[0] and "**not met**" in whole[2]
    assert "ahead of all speculation **not met**" in whole[1]
    # code: (4 x 60 + 6 x 25) / 10 = 39 ms against the oracle's 25; labels as the oracle.
    assert p.segment_goal_line(phases, SEGMENTS, 0.0, 100.0) == (
        "- per segment: specroute within 5% of the oracle in 1 of 2 (not: code 1.560x)"
    )
    assert p.segment_goal_line(phases, SEGMENTS, 40.0, 100.0).endswith("in 2 of 2")


def test_tables_report_and_section(tmp_path: Path) -> None:
    phases = _four_phases()
    fleet = p.fleet_table(phases, 0.0, 100.0)
    assert len(fleet) == 2 + 4
    oracle_row = next(line for line in fleet if line.startswith("| oracle |"))
    assert oracle_row.endswith("| 1.000 |")
    seg = p.segment_table(phases, SEGMENTS, 0.0, 100.0)
    assert len(seg) == 2 + 2 * 4
    assert "| code | all baseline | 10 | 0 | 0% | 50.0 / 50.0 | 60.0 / 60.0 | 60.0 | 2.400 |" in seg

    conv = p.convergence(
        [
            _flip(40.0, "code", "canary_promote", "full"),
            _flip(45.0, "labels", "no_benefit", "paused"),
        ],
        SEGMENTS,
        100.0,
    )
    oracle = p.oracle_arms(SEGMENTS, BASE, SPEC)
    shed = {name: {"code": 1, "labels": 0} for name in p.CONFIGS}
    load = {name: (1.0, 2.5) for name in p.CONFIGS}
    body = report_lines(phases, oracle, conv, 100.0, shed, load)
    text = "\n".join(body)
    assert "### After the last flip (arrivals in [45, 100) s" in text
    assert "### Whole phases" in text
    assert "code → spec (baseline 60.0 vs spec 25.0 ms/token)" in text
    assert "code canary → full 100% at 40 s (canary_promote at 40 s)" in text
    assert "every segment settled" in text
    assert "all baseline 1 → 0" not in text and "oracle 1.0 → 2.5" in text
    assert "Shed (arrivals over a segment's concurrency bound): all baseline 1;" in text

    png = plot_segments(phases, SEGMENTS, 45.0, 100.0, tmp_path / "bars.png")
    assert png.stat().st_size > 5000
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Other\n\nkept\n")
    for _ in range(2):
        write_section(results, "\n".join([SECTION, "", *body]))
    written = results.read_text()
    assert written.count(SECTION) == 1 and "kept" in written
    assert written.count("### Whole phases") == 1


def test_no_window_after_a_flip_when_the_automation_never_flipped() -> None:
    conv = p.convergence([], SEGMENTS, 100.0)
    body = report_lines(_four_phases(), p.oracle_arms(SEGMENTS, BASE, SPEC), conv, 100.0, {}, {})
    text = "\n".join(body)
    assert "### After the last flip" not in text and "No window after a flip" in text
    assert "no state change" in text


def test_cli_refuses_bad_input_before_starting_anything(tmp_path: Path) -> None:
    runner = CliRunner()
    short = runner.invoke(app, ["policy", "--duration", "5"])
    assert short.exit_code == 2 and "--duration" in short.output
    foreign = tmp_path / "precious"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    refused = runner.invoke(app, ["policy", "--data-dir", str(foreign)])
    assert refused.exit_code == 2
    assert "not made by the demo" in " ".join(refused.output.split())
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_cli_refuses_a_holdout_or_user_count_out_of_range() -> None:
    runner = CliRunner()
    for args in (["--holdout", "0.1"], ["--holdout", "60"], ["--users", "0"]):
        result = runner.invoke(app, ["policy", *args])
        assert result.exit_code == 2 and args[0] in result.output, (args, result.output)
