"""`specroute admin evaluations diff` and `eval-sets add-case` against a real control
plane over HTTP (SQLite, migrated by `control migrate`)."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import Result

from tests.control.cli.conftest import ok
from tests.control.conftest import eval_cases, write_model_dir


def _result(key: str, outcome: str, accepted: list[int]) -> dict[str, Any]:
    return {
        "case_key": key,
        "outcome": outcome,
        "completion_tokens": 16,
        "drafts": 10,
        "accepted_per_position": accepted,
    }


def _evaluation(
    tmp_path: Path, cli: Callable[..., Result], name: str, results: list[dict[str, Any]]
) -> int:
    body = {
        "case_keys": [r["case_key"] for r in results],
        "drafts": 30,
        "position_acceptance": [0.8, 0.6],
        "mean_acceptance_length": 2.28,
        "cost_ratio": 0.1,
        "expected_speedup": {"2": 1.9},
        "case_results": results,
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(body))
    made = ok(
        cli,
        "evaluation",
        "create",
        "--results",
        str(path),
        "--pair-version",
        "1",
        "--eval-set",
        "code-evals",
        "-o",
        "json",
    )
    return int(json.loads(made)["id"])


@pytest.fixture
def evaluated(cli: Callable[..., Result], tmp_path: Path) -> tuple[int, int]:
    target, draft = write_model_dir(tmp_path / "target"), write_model_dir(tmp_path / "draft")
    ok(cli, "pair", "register", "tiny", "--target", str(target), "--draft", str(draft), "--k", "2")
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps(eval_cases(3)))
    ok(
        cli,
        "eval-set",
        "create",
        "code-evals",
        "--cases",
        str(cases),
        "--prompt-store",
        "file:///p",
    )
    before = _evaluation(
        tmp_path,
        cli,
        "before",
        [
            _result("case-0", "ok", [8, 6]),
            _result("case-1", "ok", [8, 6]),
            _result("case-2", "ok", [8, 6]),
        ],
    )
    after = _evaluation(
        tmp_path,
        cli,
        "after",
        [
            _result("case-0", "ok", [8, 6]),
            _result("case-1", "ok", [2, 0]),
            _result("case-2", "diverged", [8, 6]),
        ],
    )
    return before, after


def test_evaluations_diff_prints_the_cases_that_changed_most(
    cli: Callable[..., Result], evaluated: tuple[int, int]
) -> None:
    before, after = evaluated
    out = ok(cli, "evaluations", "diff", str(before), str(after))
    lines = out.splitlines()
    assert lines[0] == (
        f"evaluation {before} → {after}: 3 cases in both, 2 changed (1 worse, 0 better "
        f"outcome), showing 2; only in {before}: 0, only in {after}: 0"
    )
    body = "\n".join(lines[1:])
    assert body.index("case-2") < body.index("case-1") and "case-0" not in body
    assert "ok → diverged" in body and "-0.600" in body and "0.700 → 0.100" in body
    limited = json.loads(
        ok(cli, "evaluation", "diff", str(before), str(after), "--limit", "1", "-o", "json")
    )
    assert [c["case_key"] for c in limited["cases"]] == ["case-2"]
    # The plural alias still lists when given no command.
    listed = ok(cli, "evaluations")
    assert "mean acc len" in listed and "2.280" in listed and "per_request" in listed
    missing = cli("evaluations", "diff", str(before), "98765")
    assert missing.exit_code == 1 and "error 404" in missing.output


def test_eval_sets_add_case_turns_a_request_into_a_case_with_the_stores_digest(
    cli: Callable[..., Result], server: str, tmp_path: Path
) -> None:
    from specwire.prompts import prompt_digest
    from tests.control.requests.records import batch, record

    stored = httpx.post(
        server + "/internal/v1/telemetry",
        json=batch([record("req-42", outcome="error", http_status=500)]),
        headers={"Authorization": "Bearer cli-internal"},
    )
    assert stored.is_success, stored.text
    store = tmp_path / "prompts.jsonl"
    messages = [{"role": "user", "content": "delete all rows"}]
    store.write_text(json.dumps({"ref": "incident-42", "messages": messages}) + "\n")
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps(eval_cases(2)))
    ok(cli, "eval-set", "create", "ops", "--cases", str(cases), "--prompt-store", f"file://{store}")
    line = ok(
        cli,
        "eval-sets",
        "add-case",
        "ops",
        "--from-request",
        "req-42",
        "--source",
        "production_incident",
        "--prompt-ref",
        "incident-42",
        "--reviewer",
        "oncall",
        "--refresh-by",
        "2999-01-01",
        "--boundary",
        "irreversible_action",
    )
    assert line.strip() == (
        "eval set ops v2 (id 2): case incident-req-42 from request req-42 "
        "(production_incident, blocking: irreversible_action), 3 cases"
    )
    shown = json.loads(ok(cli, "eval-set", "show", "ops", "-o", "json"))
    case = shown["cases"][-1]
    assert case["prompt_sha256"] == prompt_digest(messages)
    assert case["labels"]["request"] == "req-42" and case["labels"]["temperature"] == "0.7"
    assert "delete all rows" not in json.dumps(shown)

    missing_ref = cli(
        "eval-sets",
        "add-case",
        "ops",
        "--from-request",
        "req-42",
        "--prompt-ref",
        "nope",
        "--reviewer",
        "r",
        "--refresh-by",
        "2999-01-01",
    )
    assert missing_ref.exit_code == 2 and "--prompt-ref 'nope' is not in" in missing_ref.output
    unknown = cli(
        "eval-sets",
        "add-case",
        "ops",
        "--from-request",
        "req-0",
        "--prompt-ref",
        "incident-42",
        "--reviewer",
        "r",
        "--refresh-by",
        "2999-01-01",
    )
    assert unknown.exit_code == 1 and "error 422" in unknown.output
    # The plural alias alone still lists.
    assert "ops" in ok(cli, "eval-sets")
