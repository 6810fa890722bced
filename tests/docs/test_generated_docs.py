"""The configuration reference and metrics catalog are generated and current."""

from pathlib import Path

import yaml

from docs.generate import CATALOG, DERIVED, EXCLUSIONS, OUTPUTS, all_metrics

ROOT = Path(__file__).resolve().parents[2]


def test_every_metric_has_a_catalog_entry_and_no_entry_is_orphaned() -> None:
    live = {m.name for m in all_metrics()}
    assert live == set(CATALOG), live ^ set(CATALOG)
    assert set(EXCLUSIONS) == set(CATALOG), set(EXCLUSIONS) ^ set(CATALOG)
    assert any(name.startswith("specroute_control_") for name in live)
    assert any(name.startswith("specroute_gateway_") for name in live)


def test_every_derived_ratio_is_a_recording_rule() -> None:
    rules = yaml.safe_load((ROOT / "dashboards/rules.yml").read_text())
    recorded = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    assert set(DERIVED) <= recorded, set(DERIVED) - recorded


def test_committed_docs_are_current() -> None:
    for path, render in OUTPUTS.items():
        assert path.read_text() == render(), f"{path.name} is stale: run python docs/generate.py"


def test_configuration_reference_names_the_issue_settings() -> None:
    text = next(render() for path, render in OUTPUTS.items() if path.name == "configuration.md")
    for env in (
        "SPECROUTE_DATABASE_URL",
        "SPECROUTE_ADMIN_TOKEN",
        "SPECROUTE_INTERNAL_TOKEN",
        "SPECROUTE_GATEWAY_CONTROL_URL",
    ):
        assert f"`{env}`" in text
