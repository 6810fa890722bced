"""`admin telemetry acceptance`: draft acceptance over a segment's stored windows, by
draft position and by response position, outside any rollout."""

from typing import Any

import typer

from control.cli.admin.output import Output, OutputOption, console, emit, group, table
from control.cli.admin.session import client, run

telemetry_app = group("Read the gateways' stored telemetry windows.")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def acceptance_lines(body: dict[str, Any]) -> list[str]:
    """The summary above the bucket table: what was read, and the totals."""
    arm = body["arm"] or "both arms"
    pool = (
        f", pool {body['pool_id']} (pair version {body['pair_version_id']})"
        if body["pool_id"] is not None
        else ""
    )
    lines = [
        f"segment {body['segment_id']}, {arm}{pool}, windows starting "
        f"{body['since'][:19]} .. {body['read_until'][:19]}: "
        f"{body['windows']} windows, {body['requests']} requests",
        f"accepted {body['accepted_tokens']} of {body['drafted_tokens']} drafted tokens "
        f"({_rate(body['acceptance_rate'])}) in {body['drafts']} drafts, per position "
        + (" / ".join(f"{r:.2f}" for r in body["per_position_rate"]) or "-")
        + f" {body['accepted_per_position']}",
    ]
    if body["truncated"]:
        lines.append(
            f"truncated: more than {body['max_windows']} windows matched; "
            f"--since {body['read_until']} reads the rest"
        )
    return lines


@telemetry_app.command("acceptance")
def acceptance(
    segment: str = typer.Option(..., help="Segment name or id."),
    pool: str | None = typer.Option(
        None, help="Spec pool name or id: only its pair version's windows."
    ),
    arm: str | None = typer.Option(None, help="spec or baseline; default: both."),
    since: str | None = typer.Option(
        None, help="Windows starting at or after (ISO 8601, UTC); default: an hour before until."
    ),
    until: str | None = typer.Option(
        None, help="Windows starting before (ISO 8601, UTC); default: now."
    ),
    output: Output = OutputOption,
) -> None:
    """Acceptance summed over a segment's stored windows: per draft position and per
    response-position bucket."""
    body: dict[str, Any] = run(
        lambda: client().telemetry_acceptance(segment, pool=pool, arm=arm, since=since, until=until)
    )

    def render() -> None:
        for line in acceptance_lines(body):
            typer.echo(line)
        out = table("response position", "drafted", "accepted", "acceptance")
        for p in body["acceptance_by_response_position"]:
            out.add_row(
                p["bucket"],
                str(p["drafted_tokens"]),
                str(p["accepted_tokens"]),
                _rate(p["acceptance_rate"]),
            )
        console().print(out)

    emit(body, output, render)
