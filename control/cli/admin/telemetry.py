"""`admin telemetry acceptance`: draft acceptance over a segment's stored windows (or
those of requests that matched no segment), by draft position and by response
position, outside any rollout."""

from typing import Any

import typer

from control.cli.admin.output import Output, OutputOption, console, emit, group, table
from control.cli.admin.session import CliInputError, client, run

telemetry_app = group("Read the gateways' stored telemetry windows.")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def acceptance_lines(body: dict[str, Any]) -> list[str]:
    """The summary above the bucket table: what was read, and the totals."""
    arm = body["arm"] or "both arms"
    if body["pool_id"] is not None:
        pool = f", pool {body['pool_id']} (pair version {body['pair_version_id']})"
    elif body["pair_version_id"] is not None:
        pool = f", pair version {body['pair_version_id']}"
    else:
        pool = ""
    segment = "no segment" if body["segment_id"] is None else f"segment {body['segment_id']}"
    lines = [
        f"{segment}, {arm}{pool}, windows starting "
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
    segment: str | None = typer.Option(None, help="Segment name or id (or --unsegmented)."),
    unsegmented: bool = typer.Option(
        False, "--unsegmented", help="The windows of requests that matched no segment."
    ),
    pool: str | None = typer.Option(
        None, help="Spec pool name or id: only its pair version's windows."
    ),
    pair_version: int | None = typer.Option(
        None, help="Pair version id: only its windows (with --pool, the pool's version)."
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
    """Acceptance summed over a segment's stored windows (or, with --unsegmented, those
    of requests that matched no segment): per draft position and per response-position
    bucket."""

    def read() -> dict[str, Any]:
        if (segment is None) == (not unsegmented):
            raise CliInputError("give one of --segment NAME and --unsegmented")
        got: dict[str, Any] = client().telemetry_acceptance(
            segment,
            unsegmented=unsegmented,
            pool=pool,
            pair_version=pair_version,
            arm=arm,
            since=since,
            until=until,
        )
        return got

    body = run(read)

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
