"""`admin rollout status NAME [--watch]` and `admin rollout wait NAME --for=STATE`.

Both poll the rollout (GET, every --interval seconds). Watching prints one
timestamped line whenever state, share or version changes, so a pipe or a CI log
reads like a log. `wait` exits 0 once the rollout is in the state, 3 when
--timeout passes first (1 for an API error, as every command)."""

import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import typer

from control.cli.admin.output import Output, OutputOption, emit_data
from control.cli.admin.rollouts import rollout_app, summary
from control.cli.admin.session import EXIT_TIMEOUT, client, fail, run


class State(StrEnum):
    """The rollout states (specwire.snapshot.RolloutState; a test keeps them
    equal, spelled out so that `--help` needs no pydantic)."""

    draft = "draft"
    offline = "offline"
    shadow = "shadow"
    canary = "canary"
    ramping = "ramping"
    full = "full"
    paused = "paused"
    disabled = "disabled"
    probation = "probation"
    rolled_back = "rolled_back"


SETTLED = {State.full, State.disabled, State.rolled_back}
IntervalOption: Any = typer.Option(2.0, "--interval", min=0.05, help="Seconds between polls.")


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _key(rollout: dict[str, Any]) -> tuple[Any, ...]:
    return rollout["state"], rollout["percentage"], rollout["version"]


def _say(rollout: dict[str, Any], output: Output) -> None:
    if output is Output.table:
        actions = ", ".join(rollout["allowed_actions"]) or "none"
        typer.echo(f"{_stamp()} {summary(rollout)}; allowed: {actions}")
    else:
        emit_data(rollout, output)


def _poll(rollout: str) -> dict[str, Any]:
    found: dict[str, Any] = run(lambda: client().rollouts.find(rollout))
    return found


@rollout_app.command("status")
def rollout_status(
    rollout: str = typer.Argument(..., metavar="NAME_OR_ID", help="Rollout name or id."),
    watch: bool = typer.Option(
        False,
        "--watch",
        "-w",
        help="Keep polling; a line per change, until full, disabled or rolled_back "
        "(or --timeout, or Ctrl-C).",
    ),
    interval: float = IntervalOption,
    timeout: float | None = typer.Option(None, help="Stop watching after this many seconds."),
    output: Output = OutputOption,
) -> None:
    """The rollout's state, share, version and allowed actions (one timestamped line)."""
    current = _poll(rollout)
    _say(current, output)
    if not watch:
        return
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while current["state"] not in SETTLED:
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(interval)
            latest = _poll(rollout)
            if _key(latest) != _key(current):
                _say(latest, output)
            current = latest
    except KeyboardInterrupt:
        return


@rollout_app.command("wait")
def rollout_wait(
    rollout: str = typer.Argument(..., metavar="NAME_OR_ID", help="Rollout name or id."),
    for_: State = typer.Option(..., "--for", help="The state to wait for."),
    timeout: float = typer.Option(600.0, help="Give up after this many seconds (exit 3)."),
    interval: float = IntervalOption,
    output: Output = OutputOption,
) -> None:
    """Wait until the rollout is in a state: exit 0 when it is, 3 on timeout."""
    deadline = time.monotonic() + timeout
    current = _poll(rollout)
    while current["state"] != for_.value:
        if time.monotonic() >= deadline:
            fail(
                f"timed out after {timeout:g} s waiting for {for_.value}: {summary(current)}",
                EXIT_TIMEOUT,
            )
        time.sleep(min(interval, max(deadline - time.monotonic(), 0.0)))
        current = _poll(rollout)
    _say(current, output)
