"""`admin status` (rollouts and pools at a glance) and `admin adapters`."""

from typing import Any

import typer

from control.cli.admin.output import Output, OutputOption, console, emit, table
from control.cli.admin.session import client, run


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def status(output: Output = OutputOption) -> None:
    """Rollouts and pools at a glance."""
    body = run(lambda: client().status())
    pools = {p["id"]: p for p in body["pools"]}
    segments = {s["id"]: s["name"] for s in body["segments"]}

    def render() -> None:
        rollouts = table(
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
        for r in body["rollouts"]:
            rollouts.add_row(
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
        console().print(rollouts)
        pool_table = table(
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
        console().print(pool_table)

    emit({"rollouts": body["rollouts"], "pools": body["pools"]}, output, render)


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
    body: dict[str, Any] = run(
        lambda: client().adapter_acceptance(
            adapter=adapter, tenant=tenant, segment_id=segment, since=since, until=until
        )
    )

    def render() -> None:
        out = table(
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
            out.add_row(
                e["adapter"] or "-",
                e["pair"] or "-",
                str(e["requests"]),
                str(e["spec_requests"]),
                str(e["drafts"]),
                _num(e["acceptance_rate"]),
                _num(e["mean_acceptance_length"]),
                " / ".join(f"{v:.2f}" for v in e["per_position_rate"]) or "-",
            )
        console().print(out)

    emit(body, output, render)
