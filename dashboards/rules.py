"""The Prometheus rules of dashboards/rules.yml, rendered for a deployment.

rules.yml links each alert's runbook by its path in the repository
(`docs/runbooks/...`), which promtool's unit tests and the runbook test read.
An on-call person needs a link they can open: `render(base_url)` makes every
`runbook_url` absolute from a base URL (`SPECROUTE_RUNBOOK_BASE_URL`, e.g. the
repository's docs on your Git server). `python -m dashboards.rules` prints the
rendered file; deploy/generate.py writes the same rules into the PrometheusRule.
"""

import argparse
import copy
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

HERE = Path(__file__).resolve().parent
RULES = HERE / "rules.yml"


class RulesSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SPECROUTE_", extra="ignore")

    runbook_base_url: str | None = Field(
        default=None,
        description=(
            "Base URL the alert rules' `runbook_url` annotations are made absolute from "
            "(`python -m dashboards.rules`, deploy/generate.py), e.g. "
            "`https://git.example.com/specroute/blob/main/`; a runbook's link is the base "
            "plus its repository path `docs/runbooks/NAME.md`. Unset: paths stay relative."
        ),
    )


def load() -> dict[str, Any]:
    rules: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return rules


def alerts(rules: dict[str, Any]) -> list[dict[str, Any]]:
    return [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]


def absolute_runbooks(rules: dict[str, Any], base_url: str | None) -> dict[str, Any]:
    """A copy of `rules` whose runbook links start with `base_url` (unchanged when None)."""
    rendered = copy.deepcopy(rules)
    if not base_url:
        return rendered
    base = base_url.rstrip("/") + "/"
    for alert in alerts(rendered):
        annotations = alert.get("annotations", {})
        path = annotations.get("runbook_url")
        if path and "://" not in path:
            annotations["runbook_url"] = base + path.lstrip("/")
    return rendered


def render(base_url: str | None = None) -> str:
    """rules.yml as YAML with absolute runbook links (base: the argument, else the setting)."""
    base = base_url if base_url is not None else RulesSettings().runbook_base_url
    return yaml.safe_dump(absolute_runbooks(load(), base), sort_keys=False, width=100)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runbook-base-url", help="default: $SPECROUTE_RUNBOOK_BASE_URL")
    args = parser.parse_args(argv)
    print(render(args.runbook_base_url), end="")


if __name__ == "__main__":
    main()
