"""bench.decisions.fingerprint: a run's whole outcome per line, the same on a rerun."""

import io
import json

import pytest

from bench.decisions.fingerprint import fingerprint, main


def test_lines_hold_every_outcome_field_and_repeat_exactly() -> None:
    first, second = io.StringIO(), io.StringIO()
    assert fingerprint(["weak"], 2, [1, 4], out=first) == 4
    assert fingerprint(["weak"], 2, [1, 4], out=second) == 4
    assert first.getvalue() == second.getvalue()
    lines = [json.loads(line) for line in first.getvalue().splitlines()]
    # Sorted by (scenario, workers, dispatch, seed).
    assert [(r["scenario"], r["workers"], r["seed"]) for r in lines] == [
        ("weak", 1, 0),
        ("weak", 1, 1),
        ("weak", 4, 0),
        ("weak", 4, 1),
    ]
    for run in lines:
        assert run["final_state"] == "rolled_back"
        assert run["right"] is True
        [flip] = run["flips"]
        assert flip["kind"] == "guard_low_acceptance"
        assert flip["action"] == "rollback"
        assert flip["second"] > 0 and "acceptance" in flip["reason"]
    # Seeds differ in what they drew (the reason quotes the request count).
    assert lines[0]["flips"][0]["reason"] != lines[1]["flips"][0]["reason"]


def test_an_unknown_scenario_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--scenarios", "null,nosuch"])
    assert exc.value.code == 2
    assert "unknown scenarios: nosuch" in capsys.readouterr().err
