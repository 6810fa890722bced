"""`admin rollout ...`: rollouts, their actions, and watching or waiting on one."""

from typing import Any

import typer

from control.cli.admin.crud import add_delete, add_update, emit_rows
from control.cli.admin.depth import depth_app
from control.cli.admin.output import Output, OutputOption, console, emit, emit_line, group
from control.cli.admin.session import client, parse_floats, run

rollout_app = group("Rollouts, their actions, status and wait.")

add_update(rollout_app, "rollouts", "rollout", "stages, threshold_set_id")
add_delete(rollout_app, "rollouts", "rollout")
rollout_app.add_typer(depth_app, name="depth-ladder")

ReasonOption: Any = typer.Option(None, help="Recorded in the audit and decision.")
VersionOption: Any = typer.Option(None, "--if-match", help="Expected version (412 if stale).")


def summary(rollout: dict[str, Any]) -> str:
    return (
        f"rollout {rollout['name']}: {rollout['state']} at {rollout['percentage']:g} % "
        f"(version {rollout['version']})"
    )


@rollout_app.command("list")
def rollout_list(
    state: str | None = typer.Option(None, help="Only rollouts in this state."),
    segment: str | None = typer.Option(None, help="Only this segment's (name or id)."),
    output: Output = OutputOption,
) -> None:
    """Rollouts with their state, share and allowed actions."""

    def go() -> list[dict[str, Any]]:
        admin = client()
        segment_id = admin.segments.id_of(segment) if segment else None
        return list(admin.rollouts.list(state=state, segment_id=segment_id))

    columns: list[tuple[str, Any]] = [
        ("name", "name"),
        ("id", "id"),
        ("segment", "segment_id"),
        ("state", "state"),
        ("%", "percentage"),
        ("pair v", "pair_version_id"),
        ("stages", lambda r: ",".join(f"{s:g}" for s in r["stages"])),
        ("ver", "version"),
        ("allowed actions", lambda r: ", ".join(r["allowed_actions"])),
    ]
    emit_rows(run(go), columns, output)


@rollout_app.command("create")
def rollout_create(
    name: str,
    segment: str = typer.Option(..., help="Segment name or id."),
    pair_version: int = typer.Option(..., help="Pair version id."),
    spec_pool: str = typer.Option(..., help="Spec pool name or id."),
    baseline_pool: str = typer.Option(..., help="Baseline pool name or id."),
    thresholds: str = typer.Option(..., help="Threshold set id, or a name (its latest version)."),
    stages: str = typer.Option("1,5,25,50,100", help="Comma-separated percentages."),
    output: Output = OutputOption,
) -> None:
    """Create a rollout (state draft)."""

    def go() -> dict[str, Any]:
        admin = client()
        sets = admin.threshold_sets
        body = {
            "name": name,
            "segment_id": admin.segments.id_of(segment),
            "pair_version_id": pair_version,
            "spec_pool_id": admin.pools.id_of(spec_pool),
            "baseline_pool_id": admin.pools.id_of(baseline_pool),
            "threshold_set_id": int(thresholds)
            if thresholds.isdigit()
            else int(sets.latest(thresholds)["id"]),
            "stages": parse_floats("--stages", stages),
        }
        return admin.rollouts.create(body)

    created = run(go)
    emit_line(created, output, summary(created))


def _act(
    action: str,
    rollout: str,
    reason: str | None,
    if_match: int | None,
    waive: list[str],
    output: Output,
) -> None:
    acted = run(
        lambda: client().rollouts.act(
            rollout, action, reason=reason, waive=waive, if_match=if_match
        )
    )
    emit_line(acted, output, summary(acted))


def _action(name: str) -> None:
    def act(
        rollout: str = typer.Argument(..., metavar="NAME_OR_ID", help="Rollout name or id."),
        reason: str | None = ReasonOption,
        if_match: int | None = VersionOption,
        output: Output = OutputOption,
    ) -> None:
        _act(name, rollout, reason, if_match, [], output)

    act.__doc__ = f"{name.capitalize()} a rollout."
    rollout_app.command(name)(act)


@rollout_app.command("start")
def rollout_start(
    rollout: str = typer.Argument(..., metavar="NAME_OR_ID", help="Rollout name or id."),
    reason: str | None = ReasonOption,
    if_match: int | None = VersionOption,
    waive: list[str] = typer.Option(
        [],
        "--waive",
        help="offline_evaluation or shadow: go without that evidence (audited; needs "
        "--reason). A waived shadow starts the canary directly.",
    ),
    output: Output = OutputOption,
) -> None:
    """Move a rollout one stage on: into shadow (needs a qualifying offline evaluation),
    or out of shadow into canary (needs the shadow's exit criterion)."""
    _act("start", rollout, reason, if_match, waive, output)


for _name in ("evaluate", "promote", "pause", "resume", "rollback", "disable", "enable"):
    _action(_name)


@rollout_app.command("show")
def rollout_show(
    rollout: str = typer.Argument(..., metavar="NAME_OR_ID", help="Rollout name or id."),
    output: Output = OutputOption,
) -> None:
    """One rollout, with its allowed actions, and what the automation sees in it now."""
    from control.cli.admin.views import readout_table, rollout_table

    def go() -> tuple[dict[str, Any], dict[str, Any]]:
        found = client().rollouts.find(rollout)
        return found, client().rollouts.evidence(found["id"])

    shown, readout = run(go)

    def render() -> None:
        console().print(rollout_table(shown))
        console().print(readout_table(readout))

    emit({"rollout": shown, "evidence": readout}, output, render)
