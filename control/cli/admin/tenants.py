"""`admin tenant ...` and `admin key ...`: tenants and their API keys."""

from typing import Any

import typer

from control.cli.admin.crud import add_crud, emit_rows
from control.cli.admin.output import Output, OutputOption, emit_document, emit_line, group
from control.cli.admin.session import client, run

tenant_app = group("Tenants (who may use which models, quotas).")
key_app = group("A tenant's API keys.")

add_crud(
    tenant_app,
    "tenants",
    "tenant",
    [
        ("name", "name"),
        ("id", "id"),
        ("models", lambda t: ", ".join(t["allowed_models"] or []) or "all"),
        ("override", "override_allowed"),
        ("tokens/min", "weighted_tokens_per_minute"),
        ("record rate", "request_sample_rate"),
        ("ver", "version"),
    ],
    "Tenants.",
    update_fields=(
        "allowed_models, override_allowed, weighted_tokens_per_minute, request_sample_rate, "
        "clear_quota"
    ),
    delete=True,
)


@tenant_app.command("create")
def tenant_create(
    name: str,
    override_allowed: bool = typer.Option(
        False, help="May send the X-Specroute-Arm override header."
    ),
    request_sample_rate: float = typer.Option(
        1.0, min=0.0, max=1.0, help="Share of requests that get a per-request record."
    ),
    output: Output = OutputOption,
) -> None:
    """Create a tenant."""
    body = {
        "name": name,
        "override_allowed": override_allowed,
        "request_sample_rate": request_sample_rate,
    }
    emit_document(run(lambda: client().tenants.create(body)), output, title=f"tenant {name}")


def _create_key(tenant: str, name: str, output: Output) -> None:
    created = run(lambda: client().tenants.create_key(tenant, name))
    emit_line(created, output, created["key"])


@tenant_app.command("key")
def tenant_key(
    tenant: str = typer.Argument(..., help="Tenant name or id."),
    name: str = typer.Option("", help="Key name."),
    output: Output = OutputOption,
) -> None:
    """Create an API key for a tenant; the key is printed once (= `key create`)."""
    _create_key(tenant, name, output)


@key_app.command("create")
def key_create(
    tenant: str = typer.Argument(..., help="Tenant name or id."),
    name: str = typer.Option("", help="Key name."),
    output: Output = OutputOption,
) -> None:
    """Create an API key for a tenant; prints the key (shown once) alone on stdout."""
    _create_key(tenant, name, output)


@key_app.command("list")
def key_list(
    tenant: str = typer.Argument(..., help="Tenant name or id."),
    output: Output = OutputOption,
) -> None:
    """A tenant's API keys (prefixes only; secrets are never shown again)."""
    rows = run(lambda: list(client().tenants.keys(tenant)))
    columns: list[tuple[str, Any]] = [
        ("id", "id"),
        ("name", "name"),
        ("prefix", "prefix"),
        ("created", lambda k: k["created_at"][:19]),
        ("revoked", lambda k: (k["revoked_at"] or "")[:19] or "-"),
    ]
    emit_rows(rows, columns, output)


@key_app.command("show")
def key_show(
    tenant: str = typer.Argument(..., help="Tenant name or id."),
    key: str = typer.Argument(..., metavar="NAME_OR_ID", help="The key's name or id."),
    output: Output = OutputOption,
) -> None:
    """One API key of a tenant, by name or id (its prefix; the secret is never shown again)."""
    doc = run(lambda: client().tenants.key(tenant, key))
    emit_document(doc, output, title=f"key {doc['name'] or doc['prefix']} of tenant {tenant}")


@key_app.command("revoke")
def key_revoke(
    tenant: str = typer.Argument(..., help="Tenant name or id."),
    key_id: int = typer.Argument(..., help="The key's id (`key list`)."),
    output: Output = OutputOption,
) -> None:
    """Revoke an API key (gateways refuse it from their next snapshot)."""
    revoked = run(lambda: client().tenants.revoke_key(tenant, key_id))
    emit_line(revoked, output, f"key {revoked['prefix']} (id {revoked['id']}) revoked")
