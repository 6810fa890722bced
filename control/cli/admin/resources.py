"""`admin pool|segment|thresholds|token ...`: engine pools, traffic segments,
threshold sets and admin tokens."""

from typing import Any

import typer

from control.cli.admin.crud import add_crud, add_list, add_show
from control.cli.admin.output import Output, OutputOption, emit_document, emit_line, group
from control.cli.admin.session import client, parse_object, run

pool_app = group("Engine pools.")
segment_app = group("Traffic segments.")
thresholds_app = group(help="Threshold sets (each change is a new version).")
token_app = group("Admin tokens (scoped bearer tokens).")


def _healthy(pool: dict[str, Any]) -> str:
    workers = pool.get("workers") or []
    return f"{sum(1 for w in workers if w.get('healthy'))}/{len(workers)}"


add_crud(
    pool_app,
    "pools",
    "pool",
    [
        ("name", "name"),
        ("id", "id"),
        ("model", "served_model_name"),
        ("pair version", lambda p: p["pair_version_id"] or "baseline"),
        ("desired", "desired_workers"),
        ("healthy/total", _healthy),
        ("ver", "version"),
    ],
    "Engine pools with their workers' health.",
    update_fields="desired_workers, engine_args",
    delete=True,
)


@pool_app.command("create")
def pool_create(
    name: str,
    model: str = typer.Option(..., help="Served model name."),
    target: str = typer.Option(..., help="Target model directory."),
    pair_version: int | None = typer.Option(None, help="Pair version id; none = baseline."),
    engine_args: str = typer.Option("{}", help="Engine arguments as JSON."),
    workers: int = typer.Option(1, help="Desired workers."),
    output: Output = OutputOption,
) -> None:
    """Create a pool (baseline without --pair-version)."""

    def go() -> dict[str, Any]:
        body = {
            "name": name,
            "served_model_name": model,
            "target_ref": target,
            "pair_version_id": pair_version,
            "engine_args": parse_object("--engine-args", engine_args),
            "desired_workers": workers,
        }
        return client().pools.create(body)

    emit_document(run(go), output, title=f"pool {name} created")


@pool_app.command("enrol")
def pool_enrol(
    pool: str = typer.Argument(..., help="Pool name or id."),
    allow: list[str] = typer.Option(
        ..., "--allow", help="Origin the agent's workers may serve on (repeatable)."
    ),
    name: str | None = typer.Option(None, help="Token name; default: agent-<pool>-<random>."),
    output: Output = OutputOption,
) -> None:
    """Enrol an engine agent for a pool; prints its token (shown once) alone on stdout."""
    import secrets

    def go() -> dict[str, Any]:
        body = {
            "name": name or f"agent-{pool}-{secrets.token_hex(4)}",
            "allowed_endpoints": allow,
        }
        return client().pools.enrol(pool, body)

    created = run(go)
    emit_line(created, output, created["token"])


add_crud(
    segment_app,
    "segments",
    "segment",
    [
        ("name", "name"),
        ("id", "id"),
        ("priority", "priority"),
        ("selector", "selector"),
        ("eval set", "eval_set"),
        ("TTFT SLO s", "ttft_slo_p95_s"),
        ("TPOT SLO s", "tpot_slo_p95_s"),
        ("ver", "version"),
    ],
    "Traffic segments, by priority.",
    update_fields="description, selector, priority, eval_set, ttft_slo_p95_s, tpot_slo_p95_s",
    delete=True,
)


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
    output: Output = OutputOption,
) -> None:
    """Create a segment."""

    def go() -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "selector": parse_object("--selector", selector)}
        body["priority"] = priority
        for key, value in (
            ("eval_set", eval_set),
            ("ttft_slo_p95_s", ttft_slo),
            ("tpot_slo_p95_s", tpot_slo),
        ):
            if value is not None:
                body[key] = value
        return client().segments.create(body)

    emit_document(run(go), output, title=f"segment {name} created")


add_list(
    thresholds_app,
    "threshold_sets",
    [
        ("name", "name"),
        ("id", "id"),
        ("v", "version"),
        ("min speedup", "min_speedup"),
        ("min acceptance", "min_acceptance_rate"),
        ("no benefit", "no_benefit_action"),
        ("created", lambda s: s["created_at"][:19]),
    ],
    "Threshold sets, every version.",
)


@thresholds_app.command("show")
def thresholds_show(
    ident: str = typer.Argument(..., metavar="NAME_OR_ID", help="Name (latest version) or id."),
    output: Output = OutputOption,
) -> None:
    """One threshold set: by id, or a name's latest version."""
    sets = client().threshold_sets
    doc = run(lambda: sets.get(int(ident)) if ident.isdigit() else sets.latest(ident))
    emit_document(doc, output, title=f"threshold set {doc['name']} v{doc['version']}")


@thresholds_app.command("create")
def thresholds_create(
    name: str,
    values: str = typer.Option(..., help="Threshold values as JSON."),
    output: Output = OutputOption,
) -> None:
    """Create version 1 of a threshold set."""
    created = run(
        lambda: client().threshold_sets.create({"name": name, **parse_object("--values", values)})
    )
    emit_document(created, output, title=f"threshold set {name} v{created['version']}")


@thresholds_app.command("update")
def thresholds_update(
    ident: str = typer.Argument(..., metavar="NAME_OR_ID", help="Name or id of a version."),
    values: str = typer.Option(..., help="The values that change, as JSON."),
    output: Output = OutputOption,
) -> None:
    """Write the next version of a threshold set (sets are never edited in place)."""

    def go() -> dict[str, Any]:
        sets = client().threshold_sets
        base = ident if ident.isdigit() else str(sets.latest(ident)["id"])
        return sets.change(base, parse_object("--values", values))

    created = run(go)
    emit_document(created, output, title=f"threshold set {created['name']} v{created['version']}")


add_list(
    token_app,
    "admin_tokens",
    [
        ("name", "name"),
        ("id", "id"),
        ("prefix", "prefix"),
        ("scopes", lambda t: ", ".join(t["scopes"])),
        ("created", lambda t: t["created_at"][:19]),
        ("revoked", lambda t: (t["revoked_at"] or "")[:19] or "-"),
    ],
    "Admin tokens (their secrets are never shown again).",
)
add_show(token_app, "admin_tokens", "admin token")


@token_app.command("create")
def token_create(
    name: str,
    scope: list[str] = typer.Option(
        ..., "--scope", help="admin:read, admin:write, ... (repeatable)."
    ),
    output: Output = OutputOption,
) -> None:
    """Create an admin token; prints the secret (shown once) alone on stdout."""
    created = run(lambda: client().admin_tokens.create({"name": name, "scopes": scope}))
    emit_line(created, output, created["token"])


@token_app.command("revoke")
def token_revoke(
    ident: str = typer.Argument(..., metavar="NAME_OR_ID", help="The token's name or id."),
    output: Output = OutputOption,
) -> None:
    """Revoke an admin token (at once, on every control replica)."""
    tokens = client().admin_tokens
    revoked = run(lambda: tokens.revoke(tokens.id_of(ident)))
    emit_line(revoked, output, f"admin token {revoked['name']} (id {revoked['id']}) revoked")
