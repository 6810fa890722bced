"""`specroute bench demo-outcomes`: counting a run's outcomes from the demo's own summary."""

import subprocess
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.demo_outcomes import SECTION, outcome_of, section
from demo.monitor import DecisionEvent
from demo.report import SegmentSummary
from demo.stack import specroute_exe


def _decision(i: int, segment: str, frm: str, to: str, kind: str, actor: str = "automation") -> Any:
    return asdict(
        DecisionEvent(
            id=i,
            t_s=30.0 * i,
            segment=segment,
            kind=kind,
            from_state=frm,
            to_state=to,
            to_percentage=100.0 if to == "full" else 0.0,
            actor=actor,
            reason=f"{kind} because of evidence {i}",
            has_record=True,
            evidence={},
        )
    )


def _segment(name: str, spec: float | None, base: float | None) -> Any:
    return asdict(SegmentSummary(name, 10, 10, 0, 5, 5, 2.5, spec, base, "full", 100.0, "", ""))


def _summary(decisions: list[Any], load: tuple[float, float]) -> dict[str, Any]:
    return {
        "segments": [_segment("code", 25.0, 55.0), _segment("labels", 70.0, 57.0)],
        "decisions": decisions,
        "machine": {"load_start": load[0], "load_end": load[1], "cpus": 2, "busy": True},
    }


def test_a_run_counts_the_automations_state_changes_only() -> None:
    both = outcome_of(
        1,
        _summary(
            [
                _decision(1, "code", "canary", "canary", "hold"),
                _decision(2, "code", "canary", "full", "canary_promote"),
                _decision(3, "labels", "canary", "rolled_back", "canary_no_benefit"),
            ],
            (1.2, 1.8),
        ),
    )
    assert (both.promoted, both.turned_off) == (True, True)
    assert [c.segment for c in both.changes_to(("full",))] == ["code"]
    # An admin's rollback is not the automation's verdict; a pause is not a rollback.
    neither = outcome_of(
        2,
        _summary(
            [
                _decision(1, "labels", "canary", "paused", "canary_no_benefit"),
                _decision(2, "code", "canary", "rolled_back", "rollback", actor="admin"),
            ],
            (6.0, 7.5),
        ),
    )
    assert (neither.promoted, neither.turned_off) == (False, False)
    assert [c.to_state for c in neither.changes] == ["paused"]

    text = section([both, neither], "specroute bench demo-outcomes --runs 2", datetime.now(UTC))
    assert text.startswith(SECTION + "\n")
    assert "- runs that promoted a segment to full: 1 of 2" in text
    assert "- **both in one run: 1 of 2**" in text
    assert "| 1 | 1.2 / 1.8 | code at 60 s (canary_promote) | labels at 90 s" in text
    assert "| 2 | 6.0 / 7.5 | none | none | labels at 30 s (canary_no_benefit)" in text
    assert "code 25/55, labels 70/57" in text
    assert "run 1, labels → rolled_back: canary_no_benefit because of evidence 3" in text


def test_a_demo_that_fails_is_reported_and_fails_the_command(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## Other\n\nkept\n")
    done = subprocess.run(
        [
            *specroute_exe(),
            "bench",
            "demo-outcomes",
            "--runs",
            "1",
            "--data-root",
            str(tmp_path / "runs"),
            "--write-results",
            str(results),
            "--",
            "--duration",
            "1",  # below the demo's minimum: it exits before starting anything
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    text = results.read_text()
    assert "## Other\n\nkept" in text
    assert "- runs that failed: 1 (exit 2, see" in text
    assert "--runs 1 --duration 1" in text
    assert "Invalid value" in (tmp_path / "runs" / "run-1.log").read_text()
