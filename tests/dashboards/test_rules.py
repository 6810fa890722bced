"""Alert and recording rules pass promtool; the dashboard JSON is generated, not edited."""

import json
import subprocess
from pathlib import Path

from dashboards.generate import OUTPUT, build, expressions
from tests.fixtures.services import require_prometheus_tool

ROOT = Path(__file__).resolve().parents[2]


def promtool() -> str:
    return require_prometheus_tool("promtool")


def test_rules_are_valid() -> None:
    out = subprocess.run(
        [promtool(), "check", "rules", str(ROOT / "dashboards/rules.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 20 rules found" in out.stdout


def test_rule_unit_tests_pass() -> None:
    out = subprocess.run(
        [promtool(), "test", "rules", str(ROOT / "dashboards/tests/rules_test.yml")],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT / "dashboards/tests",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_committed_dashboard_is_current() -> None:
    committed = json.loads(OUTPUT.read_text())
    assert committed == build(), "run `python dashboards/generate.py`"
    assert len(expressions(committed)) == 22
    titles = {p["title"] for p in committed["panels"]}
    assert "TPOT p95 / p99: spec vs baseline" in titles
    assert "Queue depth per pool" in titles
    assert "KV-cache usage per pool" in titles
    assert "Acceptance by draft position" in titles
