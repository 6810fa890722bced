"""`admin rollout depth-ladder ...`: set, show and clear a rollout's depth ladder (the
sibling spec pools, differing only in k, that the gateway picks by per-worker load).

The control API checks the ladder (`PATCH /admin/v1/rollouts/{id}` with
`depth_ladder`); its typed refusal (422 `depth_ladder_invalid`) prints as one line
like every other API error."""

from typing import Any

import typer

from control.cli.admin.crud import IfMatchOption
from control.cli.admin.output import (
    Output,
    OutputOption,
    cell,
    console,
    emit,
    emit_line,
    group,
    table,
)
from control.cli.admin.session import CliInputError, client, run

depth_app = group("A rollout's depth ladder: spec pools at other depths, chosen by load.")

RolloutArgument: Any = typer.Argument(..., metavar="NAME_OR_ID", help="Rollout name or id.")


def parse_rung(text: str) -> tuple[str, float | None]:
    """`POOL:MAX_LOAD` (a bounded rung) or `POOL` (the last rung). Pool names never hold
    a colon (letters, digits, '.', '_', '-')."""
    pool, sep, bound = text.rpartition(":")
    if not sep:
        return text.strip(), None
    try:
        return pool.strip(), float(bound)
    except ValueError as exc:
        raise CliInputError(f"--rung wants POOL:MAX_LOAD or POOL, got {text!r}") from exc


def ladder_line(name: str, ladder: dict[str, Any] | None) -> str:
    if ladder is None:
        return f"rollout {name}: no depth ladder"
    rungs = ", ".join(
        f"k={r['num_speculative_tokens']} pool {r['pool_id']}"
        + (f" up to {r['max_load']:g}" if r.get("max_load") is not None else "")
        for r in ladder["rungs"]
    )
    return (
        f"rollout {name}: depth ladder {rungs}; hysteresis {ladder['hysteresis']:g}, "
        f"dwell {ladder['min_dwell_s']:g} s, load averaged over "
        f"{ladder.get('load_smoothing_s', 0.0):g} s, acceptance reset "
        f"{ladder['acceptance_reset']:g}"
    )


@depth_app.command("set")
def ladder_set(
    rollout: str = RolloutArgument,
    rungs: list[str] = typer.Option(
        ...,
        "--rung",
        help="POOL:MAX_LOAD (name or id, and the per-worker load up to which it is the best "
        "depth), deepest first; the last rung is POOL alone. Repeat for each rung; the "
        "rollout's own spec pool is one of them.",
    ),
    hysteresis: float = typer.Option(0.5, help="Load margin around each bound."),
    min_dwell_s: float = typer.Option(5.0, help="No switch sooner than this after the last."),
    load_smoothing_s: float = typer.Option(
        2.0, help="Time constant (s) of the averaged load the bounds are compared with."
    ),
    acceptance_reset: float = typer.Option(
        0.15, help="A move of position-1 acceptance by more than this resets the ladder."
    ),
    if_match: str | None = IfMatchOption,
    output: Output = OutputOption,
) -> None:
    """Set a rollout's depth ladder (replaces the one it has)."""

    def go() -> dict[str, Any]:
        admin = client()
        parsed = [parse_rung(r) for r in rungs]
        body = {
            "rungs": [
                {"pool_id": admin.pools.id_of(pool)}
                | ({} if bound is None else {"max_load": bound})
                for pool, bound in parsed
            ],
            "hysteresis": hysteresis,
            "min_dwell_s": min_dwell_s,
            "load_smoothing_s": load_smoothing_s,
            "acceptance_reset": acceptance_reset,
        }
        updated: dict[str, Any] = admin.rollouts.update(
            rollout, {"depth_ladder": body}, if_match=if_match
        )
        return updated

    updated = run(go)
    emit_line(updated, output, ladder_line(updated["name"], updated["depth_ladder"]))


@depth_app.command("show")
def ladder_show(rollout: str = RolloutArgument, output: Output = OutputOption) -> None:
    """A rollout's depth ladder, rung by rung with each pool's name; JSON/YAML print the
    stored ladder (null when it has none)."""

    def go() -> tuple[dict[str, Any], dict[int, str]]:
        admin = client()
        found: dict[str, Any] = admin.rollouts.find(rollout)
        ladder = found.get("depth_ladder")
        names = {}
        for r in ladder["rungs"] if ladder else []:
            names[int(r["pool_id"])] = str(admin.pools.get(int(r["pool_id"]))["name"])
        return found, names

    found, names = run(go)
    ladder = found.get("depth_ladder")

    def render() -> None:
        if ladder is None:
            typer.echo(ladder_line(found["name"], None))
            return
        title = ladder_line(found["name"], ladder)
        out = table("rung", "pool", "pool id", "k", "max load", title=title)
        for i, r in enumerate(ladder["rungs"]):
            out.add_row(
                str(i),
                names.get(int(r["pool_id"]), "-"),
                str(r["pool_id"]),
                str(r["num_speculative_tokens"]),
                cell(r.get("max_load")),
            )
        console().print(out)

    emit(ladder, output, render)


@depth_app.command("clear")
def ladder_clear(
    rollout: str = RolloutArgument,
    if_match: str | None = IfMatchOption,
    output: Output = OutputOption,
) -> None:
    """Remove a rollout's depth ladder: its spec arm uses its own spec pool only."""

    def go() -> dict[str, Any]:
        updated: dict[str, Any] = client().rollouts.update(
            rollout, {"depth_ladder": None}, if_match=if_match
        )
        return updated

    updated = run(go)
    emit_line(updated, output, ladder_line(updated["name"], updated["depth_ladder"]))
