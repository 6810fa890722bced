"""`specroute admin ...`: the common admin operations over the REST API (httpx).

The URL and token come from --url / SPECROUTE_ADMIN_URL and --token /
SPECROUTE_ADMIN_TOKEN. API errors print their message and exit with 1.
"""

import json
import os
from enum import StrEnum
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from control.contract.admin_client import DEV_ADMIN_TOKEN, AdminClient, AdminError, ApiError

app = typer.Typer(
    help="Admin operations against the control plane's REST API.", no_args_is_help=True
)
pair_app = typer.Typer(help="Pairs and pair versions.", no_args_is_help=True)
pool_app = typer.Typer(help="Engine pools.", no_args_is_help=True)
segment_app = typer.Typer(help="Traffic segments.", no_args_is_help=True)
rollout_app = typer.Typer(help="Rollouts and their actions.", no_args_is_help=True)
tenant_app = typer.Typer(help="Tenants and API keys.", no_args_is_help=True)
thresholds_app = typer.Typer(help="Threshold sets.", no_args_is_help=True)
eval_set_app = typer.Typer(
    help="Governed eval sets (versioned, with lineage).", no_args_is_help=True
)
for sub, name in (
    (pair_app, "pair"),
    (pool_app, "pool"),
    (segment_app, "segment"),
    (rollout_app, "rollout"),
    (tenant_app, "tenant"),
    (thresholds_app, "thresholds"),
    (eval_set_app, "eval-set"),
):
    app.add_typer(sub, name=name)


class _LazyConsole:
    """Built on first use, so the terminal width (COLUMNS) is read when printing.
    Soft wrap keeps messages on one line for scripts that grep them."""

    def __getattr__(self, name: str) -> Any:
        return getattr(Console(soft_wrap=True), name)


console: Any = _LazyConsole()


class Api:
    """The SDK client plus the CLI's convention: an error prints one line, exits 1."""

    def __init__(self, url: str, token: str | None) -> None:
        self.token = token
        self.client = AdminClient(url, token)

    def _check_token(self) -> None:
        if not self.token:
            console.print(
                "[red]no admin token: export SPECROUTE_ADMIN_TOKEN (the token `specroute control "
                "serve` was started with) or pass --token; with a control plane started with "
                f"--dev, SPECROUTE_DEV_TOKENS=1 uses {DEV_ADMIN_TOKEN}"
            )
            raise typer.Exit(code=1)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        self._check_token()
        try:
            return self.client.call(method, path, **kwargs)
        except ApiError as exc:
            console.print(f"[red]error {exc.status}: {exc}")
            raise typer.Exit(code=1) from exc
        except AdminError as exc:
            console.print(f"[red]{exc}")
            raise typer.Exit(code=1) from exc

    def items(self, path: str, **params: Any) -> list[Any]:
        """Every item of a paginated listing."""
        self._check_token()
        try:
            return list(self.client.pages(path, **params))
        except ApiError as exc:
            console.print(f"[red]error {exc.status}: {exc}")
            raise typer.Exit(code=1) from exc
        except AdminError as exc:
            console.print(f"[red]{exc}")
            raise typer.Exit(code=1) from exc


_state: dict[str, Api] = {}


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
    if token is None and os.environ.get("SPECROUTE_DEV_TOKENS", "").lower() in ("1", "true"):
        token = DEV_ADMIN_TOKEN
    _state["api"] = Api(url, token)


def api() -> Api:
    return _state["api"]


def _print(body: Any) -> None:
    console.print_json(json.dumps(body))


class Output(StrEnum):
    table = "table"
    json = "json"


OutputOption = typer.Option(
    Output.table,
    "--output",
    "-o",
    help="table (folds to the terminal's width) or json (the API's documents, for scripts).",
)


def _table(*headers: str, title: str | None = None) -> Table:
    """Columns fold long values onto more lines instead of cutting them to '…'."""
    table = Table(title=title)
    for header in headers:
        table.add_column(header, overflow="fold")
    return table


def _emit_json(body: Any) -> None:
    typer.echo(json.dumps(body, indent=2))


def _pair_id(pair: str) -> int:
    if pair.isdigit():
        return int(pair)
    for row in api().items("/pairs"):
        if row["name"] == pair:
            return int(row["id"])
    console.print(f"[red]no pair named {pair!r}")
    raise typer.Exit(code=1)


@pair_app.command("create")
def pair_create(name: str, description: str = typer.Option("", help="Free text.")) -> None:
    """Create a pair (a name that versions hang off)."""
    _print(api().request("POST", "/pairs", json={"name": name, "description": description}))


@pair_app.command("register")
def pair_register(
    pair: str = typer.Argument(..., help="Pair name or id; created when the name is new."),
    target: str = typer.Option(..., help="Target model directory."),
    draft: str | None = typer.Option(None, help="Draft model directory (draft_model, eagle...)."),
    method: str = typer.Option("draft_model", help="draft_model, ngram, eagle, eagle3, mtp..."),
    k: int = typer.Option(3, "--k", help="num_speculative_tokens."),
    sample_method: str = typer.Option("greedy", help="greedy or probabilistic."),
) -> None:
    """Register a new immutable pair version (the artifacts are validated)."""
    if not pair.isdigit() and not any(p["name"] == pair for p in api().items("/pairs")):
        api().request("POST", "/pairs", json={"name": pair})
    body = {
        "method": method,
        "target_ref": target,
        "draft_ref": draft,
        "num_speculative_tokens": k,
        "draft_sample_method": sample_method,
    }
    _print(api().request("POST", f"/pairs/{_pair_id(pair)}/versions", json=body))


@pair_app.command("list")
def pair_list(output: Output = OutputOption) -> None:
    """Pairs with their versions."""
    pairs = api().items("/pairs")
    if output is Output.json:
        _emit_json(pairs)
        return
    table = _table("pair", "version id", "v", "method", "k", "status", "target")
    for p in pairs:
        for v in p["versions"] or [None]:
            if v is None:
                table.add_row(p["name"], "-", "-", "-", "-", "-", "-")
                continue
            table.add_row(
                p["name"],
                str(v["id"]),
                str(v["version"]),
                v["method"],
                str(v["num_speculative_tokens"]),
                v["status"],
                v["target_ref"],
            )
    console.print(table)


@pair_app.command("retire")
def pair_retire(pair: str, version_id: int, reason: str | None = None) -> None:
    """Retire a pair version (refused while a rollout exposes it)."""
    path = f"/pairs/{_pair_id(pair)}/versions/{version_id}/retire"
    _print(api().request("POST", path, json={"reason": reason}))


@pair_app.command("suggest-depth")
def pair_suggest_depth(
    version: int = typer.Argument(..., help="Pair version id."),
) -> None:
    """Register the sibling version at the automation's advised depth (k)."""
    for row in api().items("/pairs"):
        if any(v["id"] == version for v in row.get("versions", [])):
            sibling = api().request("POST", f"/pairs/{row['id']}/versions/{version}/suggest-depth")
            typer.echo(
                f"pair {row['name']} v{sibling['version']} (id {sibling['id']}): k="
                f"{sibling['num_speculative_tokens']}; evaluate it offline, then start a "
                "rollout on it"
            )
            return
    console.print(f"[red]no pair version {version}")
    raise typer.Exit(code=1)


@pool_app.command("create")
def pool_create(
    name: str,
    model: str = typer.Option(..., help="Served model name."),
    target: str = typer.Option(..., help="Target model directory."),
    pair_version: int | None = typer.Option(None, help="Pair version id; none = baseline."),
    engine_args: str = typer.Option("{}", help="Engine arguments as JSON."),
    workers: int = typer.Option(1, help="Desired workers."),
) -> None:
    """Create a pool (baseline without --pair-version)."""
    body = {
        "name": name,
        "served_model_name": model,
        "target_ref": target,
        "pair_version_id": pair_version,
        "engine_args": json.loads(engine_args),
        "desired_workers": workers,
    }
    _print(api().request("POST", "/pools", json=body))


@pool_app.command("enrol")
def pool_enrol(
    pool: str,
    allow: list[str] = typer.Option(
        ..., "--allow", help="Origin the agent's workers may serve on (repeatable)."
    ),
    name: str | None = typer.Option(None, help="Token name; default: agent-<pool>-<random>."),
) -> None:
    """Enrol an engine agent for a pool; prints its token (shown once) alone on stdout."""
    import secrets

    pools = {p["name"]: p["id"] for p in api().items("/pools")}
    pool_id = int(pool) if pool.isdigit() else pools.get(pool)
    if pool_id is None:
        console.print(f"[red]no pool named {pool!r}")
        raise typer.Exit(code=1)
    body = {
        "name": name or f"agent-{pool}-{secrets.token_hex(4)}",
        "allowed_endpoints": allow,
    }
    created = api().request("POST", f"/pools/{pool_id}/agent-tokens", json=body)
    typer.echo(created["token"])


@segment_app.command("create")
def segment_create(
    name: str,
    selector: str = typer.Option("{}", help='Selector JSON, e.g. {"tasks": ["code"]}.'),
    priority: int = typer.Option(0, help="Higher wins on overlap."),
    eval_set: str | None = typer.Option(
        None, help="Eval set an offline evaluation must use before a rollout may start."
    ),
    ttft_slo: float | None = typer.Option(
        None, help="TTFT p95 SLO target in seconds (a latency bucket edge; default 1.0)."
    ),
    tpot_slo: float | None = typer.Option(
        None, help="TPOT p95 SLO target in seconds (a latency bucket edge; default 0.1)."
    ),
) -> None:
    """Create a segment."""
    body = {"name": name, "selector": json.loads(selector), "priority": priority}
    if eval_set is not None:
        body["eval_set"] = eval_set
    if ttft_slo is not None:
        body["ttft_slo_p95_s"] = ttft_slo
    if tpot_slo is not None:
        body["tpot_slo_p95_s"] = tpot_slo
    _print(api().request("POST", "/segments", json=body))


@thresholds_app.command("create")
def thresholds_create(
    name: str, values: str = typer.Option(..., help="Threshold values as JSON.")
) -> None:
    """Create version 1 of a threshold set."""
    _print(api().request("POST", "/threshold-sets", json={"name": name, **json.loads(values)}))


@tenant_app.command("create")
def tenant_create(
    name: str,
    override_allowed: bool = False,
    request_sample_rate: float = typer.Option(
        1.0, min=0.0, max=1.0, help="Share of requests that get a per-request record."
    ),
) -> None:
    """Create a tenant."""
    body = {
        "name": name,
        "override_allowed": override_allowed,
        "request_sample_rate": request_sample_rate,
    }
    _print(api().request("POST", "/tenants", json=body))


@tenant_app.command("key")
def tenant_key(tenant_id: int, name: str = "") -> None:
    """Create an API key for a tenant; the key is printed once."""
    created = api().request("POST", f"/tenants/{tenant_id}/keys", json={"name": name})
    typer.echo(created["key"])


@rollout_app.command("create")
def rollout_create(
    name: str,
    segment: int = typer.Option(..., help="Segment id."),
    pair_version: int = typer.Option(..., help="Pair version id."),
    spec_pool: int = typer.Option(..., help="Spec pool id."),
    baseline_pool: int = typer.Option(..., help="Baseline pool id."),
    thresholds: int = typer.Option(..., help="Threshold set id."),
    stages: str = typer.Option("1,5,25,50,100", help="Comma-separated percentages."),
) -> None:
    """Create a rollout (state draft)."""
    body = {
        "name": name,
        "segment_id": segment,
        "pair_version_id": pair_version,
        "spec_pool_id": spec_pool,
        "baseline_pool_id": baseline_pool,
        "threshold_set_id": thresholds,
        "stages": [float(s) for s in stages.split(",")],
    }
    _print(api().request("POST", "/rollouts", json=body))


def _action(name: str) -> None:
    def run(
        rollout_id: int,
        reason: str | None = typer.Option(None, help="Recorded in the audit and decision."),
        if_match: int | None = typer.Option(None, help="Expected version (412 if stale)."),
    ) -> None:
        _act(name, rollout_id, reason, if_match, [])

    run.__doc__ = f"{name.capitalize()} a rollout."
    rollout_app.command(name)(run)


def _act(
    name: str, rollout_id: int, reason: str | None, if_match: int | None, waive: list[str]
) -> None:
    headers = {"If-Match": f'"{if_match}"'} if if_match is not None else {}
    payload: dict[str, Any] = {"reason": reason}
    if waive:
        payload["waive"] = waive
    body = api().request("POST", f"/rollouts/{rollout_id}/{name}", json=payload, headers=headers)
    typer.echo(
        f"rollout {body['name']}: {body['state']} at {body['percentage']:g} % "
        f"(version {body['version']})"
    )


@rollout_app.command("start")
def rollout_start(
    rollout_id: int,
    reason: str | None = typer.Option(None, help="Recorded in the audit and decision."),
    if_match: int | None = typer.Option(None, help="Expected version (412 if stale)."),
    waive: list[str] = typer.Option(
        [],
        "--waive",
        help="offline_evaluation or shadow: go without that evidence (audited; needs "
        "--reason). A waived shadow starts the canary directly.",
    ),
) -> None:
    """Move a rollout one stage on: into shadow (needs a qualifying offline evaluation),
    or out of shadow into canary (needs the shadow's exit criterion)."""
    _act("start", rollout_id, reason, if_match, waive)


for _name in ("evaluate", "promote", "pause", "resume", "rollback", "disable", "enable"):
    _action(_name)


@rollout_app.command("show")
def rollout_show(rollout_id: int, output: Output = OutputOption) -> None:
    """One rollout, with its allowed actions, and what the automation sees in it now."""
    rollout = api().request("GET", f"/rollouts/{rollout_id}")
    readout = api().request("GET", f"/rollouts/{rollout_id}/evidence")
    if output is Output.json:
        _emit_json({"rollout": rollout, "evidence": readout})
        return
    _print(rollout)
    console.print(_readout_table(readout))


def _verdict_cell(verdict: dict[str, Any] | None) -> str:
    if verdict is None:
        return "not evaluated in this state"
    code = f" ({verdict['code']})" if verdict.get("code") else ""
    return f"{verdict['action']}{code}: {verdict['reason']}"


def _readout_table(readout: dict[str, Any]) -> Table:
    """The automation's view, one line each: verdicts, blocking checks, acceptance per
    draft position, the speedup at this and the next stage's load, depth advice."""
    evidence = readout["evidence"]
    table = _table("what the automation sees now", "value", title="Evidence")
    table.add_row("guards", _verdict_cell(readout["guards"]))
    table.add_row("stage", _verdict_cell(readout["stage"]))
    table.add_row("blocks promotion", ", ".join(readout["blocking"]) or "nothing")
    acceptance = evidence.get("acceptance")
    if acceptance:
        rates = " / ".join(
            "-" if r is None else f"{r:.2f}" for r in acceptance["conditional_rates"]
        )
        tau = acceptance["mean_acceptance_length"]
        table.add_row("acceptance per position", f"{rates} (mean length {_num(tau)}, per draft)")
    monitor = evidence.get("acceptance_monitor")
    if monitor:
        table.add_row("acceptance test", str(monitor.get("decision")))
    here = (evidence.get("stage") or {}).get("e2e_per_token")
    if here:
        table.add_row(
            "speedup here",
            f"{here['speedup']:.3f} [{here['lower']:.3f}, {here['upper']:.3f}] "
            f"({here['spec_requests']} vs {here['baseline_requests']} requests)",
        )
    nxt = evidence.get("next_stage")
    if nxt:
        speed = nxt.get("speedup")
        bound = f"lower bound {speed['lower']:.3f}" if speed else "no evidence"
        table.add_row(
            f"at the {nxt.get('target', 'next stage')}",
            f"{nxt['share_next']:g} %: {nxt['spec_load_next']:.1f} requests per spec worker; "
            f"{bound}" + (f"; {nxt['advice']}" if nxt.get("advice") else ""),
        )
    for advice in readout["depth_advice"][:1]:
        table.add_row(
            "depth advice",
            f"k={advice['recommended_k']} (expected speedup "
            f"{advice['expected_speedup_recommended']:.3f} vs "
            f"{advice['expected_speedup_current']:.3f} at k={advice['current_k']}; "
            f"{advice['created_at'][:19]})",
        )
    if evidence.get("missing"):
        table.add_row("missing", "; ".join(evidence["missing"]))
    return table


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


@app.command("decisions")
def decisions(rollout: int | None = None, limit: int = 20, output: Output = OutputOption) -> None:
    """Latest decisions, newest first."""
    params: dict[str, Any] = {"limit": limit}
    if rollout is not None:
        params["rollout_id"] = rollout
    items = api().request("GET", "/decisions", params=params)["items"]
    if output is Output.json:
        _emit_json(items)
        return
    table = _table("id", "rollout", "kind", "from", "to", "%", "actor", "at")
    for d in items:
        table.add_row(
            str(d["id"]),
            str(d["rollout_id"]),
            d["kind"],
            d["from_state"],
            d["to_state"],
            f"{d['from_percentage']:g}→{d['to_percentage']:g}",
            d["actor"],
            d["created_at"][:19],
        )
    console.print(table)


@app.command("audit")
def audit(
    entity_type: str | None = typer.Option(None, help="pair, rollout, segment, ..."),
    actor: str | None = None,
    limit: int = 20,
    output: Output = OutputOption,
) -> None:
    """Latest audit events, newest first."""
    params: dict[str, Any] = {"limit": limit}
    if entity_type is not None:
        params["entity_type"] = entity_type
    if actor is not None:
        params["actor"] = actor
    items = api().request("GET", "/audit", params=params)["items"]
    if output is Output.json:
        _emit_json(items)
        return
    table = _table("id", "at", "actor", "action", "entity", "reason")
    for e in items:
        table.add_row(
            str(e["id"]),
            e["created_at"][:19],
            e["actor"],
            e["action"],
            f"{e['entity_type']} {e['entity_id']}",
            e["reason"] or "",
        )
    console.print(table)


@app.command("status")
def status(output: Output = OutputOption) -> None:
    """Rollouts and pools at a glance."""
    pools = {p["id"]: p for p in api().items("/pools")}
    segments = {s["id"]: s["name"] for s in api().items("/segments")}
    rollouts = api().items("/rollouts")
    if output is Output.json:
        _emit_json({"rollouts": rollouts, "pools": list(pools.values())})
        return
    table = _table(
        "rollout",
        "id",
        "segment",
        "state",
        "%",
        "pair v",
        "spec",
        "base",
        "ver",
        "allowed actions",
        title="Rollouts",
    )
    for r in rollouts:
        table.add_row(
            r["name"],
            str(r["id"]),
            segments.get(r["segment_id"], str(r["segment_id"])),
            r["state"],
            f"{r['percentage']:g}",
            str(r["pair_version_id"]),
            pools.get(r["spec_pool_id"], {}).get("name", "?"),
            pools.get(r["baseline_pool_id"], {}).get("name", "?"),
            str(r["version"]),
            ", ".join(r["allowed_actions"]),
        )
    console.print(table)
    pool_table = _table(
        "pool", "id", "model", "pair version", "workers healthy/total", title="Pools"
    )
    for p in pools.values():
        healthy = sum(1 for w in p["workers"] if w["healthy"])
        pool_table.add_row(
            p["name"],
            str(p["id"]),
            p["served_model_name"],
            str(p["pair_version_id"] or "baseline"),
            f"{healthy}/{len(p['workers'])}",
        )
    console.print(pool_table)


@app.command("eval-sets")
def eval_sets(
    name: str | None = typer.Option(None, help="Only this set's versions."),
    output: Output = OutputOption,
) -> None:
    """Eval sets with their stale cases (past refresh-by), which evaluations get flagged on."""
    params = {"name": name} if name else {}
    items = api().items("/eval-sets", **params)
    if output is Output.json:
        _emit_json(items)
        return
    table = _table("id", "name", "version", "cases", "stale", "stale cases", "prompt store")
    for s in items:
        stale = s["stale_case_keys"]
        table.add_row(
            str(s["id"]),
            s["name"],
            str(s["version"]),
            str(s["case_count"]),
            str(len(stale)),
            ", ".join(stale[:5]) + (" …" if len(stale) > 5 else ""),
            s["prompt_store"],
        )
    console.print(table)


@eval_set_app.command("create")
def eval_set_create(
    name: str,
    cases: str = typer.Option(..., help="JSON file: a list of cases (see the README)."),
    prompt_store: str = typer.Option(..., help="Where the prompts live, e.g. file:///.../p.jsonl."),
    description: str = typer.Option("", help="Free text."),
) -> None:
    """Write the next version of an eval set from a JSON file of cases."""
    with open(cases, encoding="utf-8") as f:
        rows = json.load(f)
    body = {"name": name, "description": description, "prompt_store": prompt_store, "cases": rows}
    created = api().request("POST", "/eval-sets", json=body)
    typer.echo(
        f"eval set {created['name']} v{created['version']} (id {created['id']}): "
        f"{created['case_count']} cases, {len(created['stale_case_keys'])} stale"
    )


@eval_set_app.command("show")
def eval_set_show(set_id: int) -> None:
    """One eval set with its cases and their lineage."""
    _print(api().request("GET", f"/eval-sets/{set_id}"))


@app.command("evaluations")
def evaluations(
    pair_version: int | None = typer.Option(None, help="Pair version id."),
    output: Output = OutputOption,
) -> None:
    """Offline evaluations, newest first, with the stale cases each ran."""
    params = {"pair_version_id": pair_version} if pair_version else {}
    items = api().items("/evaluations", **params)
    if output is Output.json:
        _emit_json(items)
        return
    table = _table(
        "id", "pair v", "eval set", "cases", "mean acc len", "speedup by k", "ppl", "stale"
    )
    for e in items:
        speedups = ", ".join(f"{k}:{v:.2f}" for k, v in sorted(e["expected_speedup"].items()))
        ppl = e["draft_perplexity"]
        table.add_row(
            str(e["id"]),
            str(e["pair_version_id"]),
            str(e["eval_set_id"]),
            str(e["cases"]),
            f"{e['mean_acceptance_length']:.3f}",
            speedups,
            "" if ppl is None else f"{ppl:.2f}",
            str(len(e["stale_case_keys"])),
        )
    console.print(table)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


@app.command("request")
def request_show(
    request_id: str,
    as_json: bool = typer.Option(False, "--json", help="The whole record as JSON."),
) -> None:
    """One request's story: who, which segment and rollout, arm and why, where it ran,
    its sampling settings, tokens, acceptance, latency and outcome (never its text)."""
    r = api().request("GET", f"/requests/{request_id}")
    if as_json:
        _print(r)
        return
    pair = f"{r['pair']} (version id {r['pair_version_id']})" if r["pair"] else "-"
    rollout = f"{r['rollout_id']} (version {r['rollout_version']})" if r["rollout_id"] else "none"
    segment = f"{r['segment']} ({r['segment_id']})" if r["segment_id"] else "none"
    adapter = f", adapter {r['adapter']}" if r["adapter"] else ""
    stream = " stream" if r["stream"] else ""
    sampling = ", ".join(f"{k}={v}" for k, v in r["sampling"].items() if v not in (None, 0, False))
    accepted = (
        f"{r['accepted_tokens']}/{r['drafted_tokens']} drafted tokens in {r['drafts']} drafts, "
        f"per position {r['accepted_per_position']}"
        if r["drafts"]
        else "no speculation"
    )
    error = f" ({r['error_code']})" if r["error_code"] else ""
    if r["arm"] is None:
        # Refused before routing: who (if the key was known), when, the typed error.
        tenant = f"{r['tenant']} ({r['tenant_id']})" if r["tenant"] else "unknown (key refused)"
        typer.echo(
            f"request    {r['request_id']}  received {r['received_at']}\n"
            f"tenant     {tenant}\n"
            f"asked      {r['endpoint']}, gateway {r['gateway_id']}\n"
            f"decision   not routed: refused before routing\n"
            f"outcome    {r['outcome']} HTTP {r['http_status']}{error} "
            f"after {_ms(r['e2e_ms'])}"
        )
        return
    lines = [
        f"request    {r['request_id']}  received {r['received_at']}",
        f"tenant     {r['tenant']} ({r['tenant_id']})",
        f"asked      {r['endpoint']}{stream}, model {r['model']}{adapter}",
        f"sampling   {sampling or 'defaults'}",
        f"segment    {segment}",
        f"rollout    {rollout}",
        f"decision   arm={r['arm']} reason={r['reason']}, pair {pair}",
        f"served by  pool {r['pool_id']}, worker {r['worker_id'] or '-'}, "
        f"engine {r['engine_version'] or '-'}, gateway {r['gateway_id']}",
        f"tokens     prompt {r['prompt_tokens']}, completion {r['completion_tokens']}",
        f"accepted   {accepted}",
        f"latency    TTFT {_ms(r['ttft_ms'])}, TPOT {_ms(r['tpot_ms'])}, "
        f"end-to-end {_ms(r['e2e_ms'])}",
        f"outcome    {r['outcome']} HTTP {r['http_status']}{error}",
    ]
    typer.echo("\n".join(lines))


@app.command("requests")
def requests_list(
    tenant: str | None = typer.Option(None, help="Tenant name."),
    segment: int | None = typer.Option(None, help="Segment id."),
    adapter: str | None = typer.Option(None, help="LoRA adapter."),
    arm: str | None = typer.Option(None, help="spec or baseline."),
    outcome: str | None = typer.Option(
        None, help="ok, error (an arm error), client_error (a 4xx) or cancelled."
    ),
    since: str | None = typer.Option(None, help="Received at or after (ISO 8601, UTC)."),
    until: str | None = typer.Option(None, help="Received before (ISO 8601, UTC)."),
    limit: int = 20,
) -> None:
    """Latest request records, newest first, filtered."""
    params: dict[str, Any] = {"limit": limit}
    for key, value in (
        ("tenant", tenant),
        ("segment_id", segment),
        ("adapter", adapter),
        ("arm", arm),
        ("outcome", outcome),
        ("since", since),
        ("until", until),
    ):
        if value is not None:
            params[key] = value
    table = Table("request", "received", "tenant", "segment", "arm", "reason", "status", "e2e")
    for r in api().request("GET", "/requests", params=params)["items"]:
        table.add_row(
            r["request_id"],
            r["received_at"][:19],
            r["tenant"] or "-",
            r["segment"] or "-",
            r["arm"] or "-",
            r["reason"],
            str(r["http_status"]),
            _ms(r["e2e_ms"]),
        )
    console.print(table)


@app.command("adapters")
def adapters(
    adapter: str | None = typer.Option(None, help="Only this LoRA adapter."),
    tenant: str | None = typer.Option(None, help="Tenant name."),
    segment: int | None = typer.Option(None, help="Segment id."),
    since: str | None = typer.Option(
        None, help="Received at or after (ISO 8601, UTC); default: one hour ago."
    ),
    until: str | None = typer.Option(None, help="Received before (ISO 8601, UTC)."),
    output: Output = OutputOption,
) -> None:
    """Measured acceptance per LoRA adapter and pair version (the base model as '-'),
    from the request records."""
    params = {
        key: value
        for key, value in (
            ("adapter", adapter),
            ("tenant", tenant),
            ("segment_id", segment),
            ("since", since),
            ("until", until),
        )
        if value is not None
    }
    body = api().request("GET", "/adapters/acceptance", params=params)
    if output is Output.json:
        _emit_json(body)
        return
    table = _table(
        "adapter",
        "pair",
        "requests",
        "on spec",
        "drafts",
        "acceptance",
        "mean length",
        "per position",
        title=f"since {body['since'][:19]}",
    )
    for e in body["items"]:
        table.add_row(
            e["adapter"] or "-",
            e["pair"] or "-",
            str(e["requests"]),
            str(e["spec_requests"]),
            str(e["drafts"]),
            _num(e["acceptance_rate"]),
            _num(e["mean_acceptance_length"]),
            " / ".join(f"{v:.2f}" for v in e["per_position_rate"]) or "-",
        )
    console.print(table)
