"""`admin pair ...`: pairs and their immutable versions."""

from typing import Any

import typer

from control.cli.admin.crud import add_delete, add_show, add_update
from control.cli.admin.output import (
    Output,
    OutputOption,
    console,
    emit,
    emit_document,
    group,
    table,
)
from control.cli.admin.session import client, fail, run

pair_app = group("Pairs and pair versions.")

add_show(pair_app, "pairs", "pair")
add_update(pair_app, "pairs", "pair", "description")
add_delete(pair_app, "pairs", "pair")


@pair_app.command("create")
def pair_create(
    name: str,
    description: str = typer.Option("", help="Free text."),
    output: Output = OutputOption,
) -> None:
    """Create a pair (a name that versions hang off)."""
    created = run(lambda: client().pairs.create({"name": name, "description": description}))
    emit_document(created, output, title=f"pair {name} created")


@pair_app.command("register")
def pair_register(
    pair: str = typer.Argument(..., help="Pair name or id; created when the name is new."),
    target: str = typer.Option(..., help="Target model directory."),
    draft: str | None = typer.Option(None, help="Draft model directory (draft_model, eagle...)."),
    method: str = typer.Option("draft_model", help="draft_model, ngram, eagle, eagle3, mtp..."),
    k: int = typer.Option(3, "--k", help="num_speculative_tokens."),
    sample_method: str = typer.Option("greedy", help="greedy or probabilistic."),
    output: Output = OutputOption,
) -> None:
    """Register a new immutable pair version (the artifacts are validated)."""
    from specwire.admin_client import NotFound

    def go() -> dict[str, Any]:
        pairs = client().pairs
        try:
            pair_id = pairs.id_of(pair)
        except NotFound:
            pair_id = int(pairs.create({"name": pair})["id"])
        body = {
            "method": method,
            "target_ref": target,
            "draft_ref": draft,
            "num_speculative_tokens": k,
            "draft_sample_method": sample_method,
        }
        return pairs.register(pair_id, body)

    created = run(go)
    emit_document(created, output, title=f"pair {pair} v{created['version']} registered")


@pair_app.command("list")
def pair_list(output: Output = OutputOption) -> None:
    """Pairs with their versions."""
    pairs = run(lambda: list(client().pairs.list()))

    def render() -> None:
        out = table("pair", "version id", "v", "method", "k", "status", "target")
        for p in pairs:
            for v in p["versions"] or [None]:
                if v is None:
                    out.add_row(p["name"], "-", "-", "-", "-", "-", "-")
                    continue
                out.add_row(
                    p["name"],
                    str(v["id"]),
                    str(v["version"]),
                    v["method"],
                    str(v["num_speculative_tokens"]),
                    v["status"],
                    v["target_ref"],
                )
        console().print(out)

    emit(pairs, output, render)


@pair_app.command("retire")
def pair_retire(
    pair: str = typer.Argument(..., help="Pair name or id."),
    version_id: int = typer.Argument(..., help="Pair version id."),
    reason: str | None = typer.Option(None, help="Recorded in the audit."),
    output: Output = OutputOption,
) -> None:
    """Retire a pair version (refused while a rollout exposes it)."""
    retired = run(lambda: client().pairs.retire(pair, version_id, reason))
    emit_document(retired, output, title=f"pair version {version_id} retired")


@pair_app.command("suggest-depth")
def pair_suggest_depth(
    version: int = typer.Argument(..., help="Pair version id."),
    output: Output = OutputOption,
) -> None:
    """Register the sibling version at the automation's advised depth (k)."""

    def go() -> tuple[str, dict[str, Any]]:
        for row in client().pairs.list():
            if any(v["id"] == version for v in row.get("versions", [])):
                return row["name"], client().pairs.suggest_depth(row["id"], version)
        fail(f"error 404 not_found: no pair version {version}")

    name, sibling = run(go)
    emit(
        sibling,
        output,
        lambda: typer.echo(
            f"pair {name} v{sibling['version']} (id {sibling['id']}): k="
            f"{sibling['num_speculative_tokens']}; evaluate it offline, then start a "
            "rollout on it"
        ),
    )
