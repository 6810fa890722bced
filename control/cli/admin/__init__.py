"""`specroute admin ...`: the admin API from the command line, over the SDK
(specwire.admin_client).

Every resource has the same shape: `admin pool list`, `admin pool show NAME`,
`admin pool create ...`, `admin pool update NAME --set desired_workers=2`,
`admin pool delete NAME` (where the API has the operation), by name or id, each
with `-o table|json|yaml`. The URL and token come from --url /
SPECROUTE_ADMIN_URL and --token / SPECROUTE_ADMIN_TOKEN. Errors are one line on
stderr; exit codes are in control.cli.admin.session (1 API error, 2 bad input,
3 `rollout wait` timed out).

Only typer is imported to build the commands: the SDK (httpx), rich and PyYAML
load when a command runs, so `admin --help` stays fast.
"""

import typer

from control.cli.admin import records, watch
from control.cli.admin.overview import adapters, status
from control.cli.admin.pairs import pair_app
from control.cli.admin.resources import pool_app, segment_app, thresholds_app, token_app
from control.cli.admin.rollouts import rollout_app
from control.cli.admin.session import configure
from control.cli.admin.telemetry import telemetry_app
from control.cli.admin.tenants import key_app, tenant_app

app = typer.Typer(
    help="Admin operations against the control plane's REST API.",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: rich's formatter alone takes ~0.1 s to import
)
for sub, name in (
    (pair_app, "pair"),
    (pool_app, "pool"),
    (segment_app, "segment"),
    (tenant_app, "tenant"),
    (key_app, "key"),
    (thresholds_app, "thresholds"),
    (rollout_app, "rollout"),
    (token_app, "token"),
    (records.eval_set_app, "eval-set"),
    (records.evaluation_app, "evaluation"),
    (records.decision_app, "decision"),
    (records.request_app, "request"),
    (telemetry_app, "telemetry"),
):
    app.add_typer(sub, name=name)

app.command("status")(status)
app.command("audit")(records.audit)
app.command("adapters")(adapters)
# The earlier spellings, kept for scripts (not in --help).
app.command("decisions", hidden=True)(records.decision_list)
app.command("requests", hidden=True)(records.request_list)
# `admin evaluations` alone lists; `admin evaluations diff A B` is `evaluation diff`.
app.add_typer(records.evaluations_alias, name="evaluations", hidden=True)
app.add_typer(records.eval_sets_alias, name="eval-sets", hidden=True)

__all__ = ["app", "watch"]


@app.callback()
def _connect(
    url: str = typer.Option(
        "http://127.0.0.1:8000", "--url", envvar="SPECROUTE_ADMIN_URL", help="Control plane URL."
    ),
    token: str | None = typer.Option(
        None,
        "--token",
        envvar="SPECROUTE_ADMIN_TOKEN",
        help="Admin bearer token (the one `control serve` was started with).",
    ),
) -> None:
    configure(url, token)
