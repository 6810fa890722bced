"""Alert and recording rules pass promtool; the dashboard JSON is generated, not edited."""

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

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
    assert "SUCCESS: 43 rules found" in out.stdout


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
    assert len(expressions(committed)) == 34
    titles = {p["title"] for p in committed["panels"]}
    assert "TPOT p95 / p99: spec vs baseline" in titles
    assert "Queue depth per pool" in titles
    assert "Engine CPU-seconds per token" in titles
    assert "KV-cache usage per pool" in titles
    assert "Acceptance by draft position" in titles
    # The engine telemetry of issue #25 item 4.
    assert "Acceptance by response position" in titles
    assert "KV blocks per running sequence" in titles
    assert "Decode time per sequence step (draft + verification)" in titles
    assert "Energy source per worker" in titles
    # The depth ladder of issue #25 item 2.
    assert "Depth ladder: current rung k" in titles
    assert "Depth ladder switches per minute by reason" in titles


def test_every_alert_links_a_runbook_that_exists() -> None:
    rules = yaml.safe_load((ROOT / "dashboards/rules.yml").read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    assert len(alerts) == 11
    for alert in alerts:
        url = alert["annotations"].get("runbook_url")
        assert url, f"{alert['alert']} links no runbook"
        text = (ROOT / url).read_text()
        title = text.splitlines()[0]
        assert title.startswith("# ")
        assert alert["alert"] in title.removeprefix("# ").split(", "), (alert["alert"], title)
        for section in ("What it means", "What the automation already did", "What to check"):
            assert f"**{section}.**" in text, (alert["alert"], section)
        assert "**How to reverse.**" in text


def test_runbook_links_are_made_absolute_from_the_base_url(tmp_path: Path) -> None:
    from dashboards import rules

    base = "https://git.example.com/specroute/blob/main"
    rendered_text = subprocess.run(
        [sys.executable, "-m", "dashboards.rules"],
        env=os.environ | {"SPECROUTE_RUNBOOK_BASE_URL": base},
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    rendered = yaml.safe_load(rendered_text)
    source = rules.load()
    links = [a["annotations"]["runbook_url"] for a in rules.alerts(rendered)]
    paths = [a["annotations"]["runbook_url"] for a in rules.alerts(source)]
    assert links == [f"{base}/{path}" for path in paths]
    assert all((ROOT / path).is_file() for path in paths)
    # Nothing but the links changed, and the rendered file is still valid for promtool.
    assert rules.absolute_runbooks(rendered, None) == rendered
    for alert in rules.alerts(rendered):
        alert["annotations"]["runbook_url"] = alert["annotations"]["runbook_url"].removeprefix(
            base + "/"
        )
    assert rendered == source
    out_file = tmp_path / "rules.yml"
    out_file.write_text(rendered_text)
    check = subprocess.run(
        [promtool(), "check", "rules", str(out_file)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0 and "SUCCESS: 43 rules found" in check.stdout, check.stdout
    assert yaml.safe_load(rules.render(None)) == source
