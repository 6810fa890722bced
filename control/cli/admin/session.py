"""The admin CLI's connection and its error convention.

Every command reaches the API through `client()` (the SDK's AdminClient, built
on first use). `run` turns what can go wrong into one line on stderr and an exit
code (documented in README, "The admin CLI"):

- 1: the API answered an error (`error 409 illegal_transition: ...`), the name
  or id matched nothing, the control plane was unreachable, no token was given;
- 2: bad input on the command line (unparsable JSON, a malformed --set);
- 3: `rollout wait` timed out before the rollout reached the state.

The SDK (and so httpx) is imported when the first call is made, never for --help.
"""

import os
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer

if TYPE_CHECKING:
    from specwire.admin_client import AdminClient

EXIT_API = 1
EXIT_INPUT = 2
EXIT_TIMEOUT = 3


T = TypeVar("T")


class CliInputError(Exception):
    """Bad input on the command line; exit 2."""


class _Session:
    url = "http://127.0.0.1:8000"
    token: str | None = None
    admin: "AdminClient | None" = None


_session = _Session()


def configure(url: str, token: str | None) -> None:
    if token is None and os.environ.get("SPECROUTE_DEV_TOKENS", "").lower() in ("1", "true"):
        from specwire.admin_client import DEV_ADMIN_TOKEN

        token = DEV_ADMIN_TOKEN
    _session.url, _session.token, _session.admin = url, token, None


def _skip_httpx_command_line() -> None:
    """httpx imports its own command line (`httpx._main`: click, rich.syntax,
    pygments; about 60 % of httpx's import time) whenever click is installed. The
    SDK never uses it; a stand-in keeps `admin status` inside its 0.4 s budget."""
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    stand_in = types.ModuleType("httpx._main")

    def main() -> None:
        raise SystemExit("httpx's command line is not loaded inside `specroute admin`")

    stand_in.main = main  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = stand_in


def make_client(url: str, token: str) -> "AdminClient":
    """The SDK client the commands use (tests replace it to reach an in-process app)."""
    _skip_httpx_command_line()
    from specwire.admin_client import AdminClient

    if not url.startswith("http://"):
        return AdminClient(url, token)
    import httpx

    from control.cli.admin.transport import StdlibTransport
    from specwire.admin_operations import ADMIN_PREFIX, client_options

    options = client_options(url.rstrip("/") + ADMIN_PREFIX, token, timeout_s=30.0)
    options.pop("verify")
    return AdminClient(url, token, http=httpx.Client(**options, transport=StdlibTransport()))


def client() -> "AdminClient":
    if _session.admin is None:
        if not _session.token:
            from specwire.admin_client import DEV_ADMIN_TOKEN

            fail(
                "no admin token: export SPECROUTE_ADMIN_TOKEN (the token `specroute control "
                "serve` was started with) or pass --token; with a control plane started with "
                f"--dev, SPECROUTE_DEV_TOKENS=1 uses {DEV_ADMIN_TOKEN}"
            )
        _session.admin = make_client(_session.url, _session.token)
    return _session.admin


def fail(message: str, code: int = EXIT_API) -> NoReturn:
    """One line on stderr, then the exit code."""
    typer.echo(" ".join(message.split()), err=True)
    raise typer.Exit(code=code)


def run(action: Callable[[], T]) -> T:
    """`action()`, with the SDK's and the CLI's errors as one line and an exit code."""
    _skip_httpx_command_line()
    from specwire.admin_client import AdminError, ApiError

    try:
        return action()
    except ApiError as exc:
        fail(f"error {exc.status} {exc.code}: {exc.message}")
    except AdminError as exc:
        fail(str(exc))
    except CliInputError as exc:
        fail(f"error: {exc}", EXIT_INPUT)


def parse_json(option: str, text: str) -> Any:
    import json

    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliInputError(f"{option} is not valid JSON ({exc}): {text[:80]}") from exc


def parse_object(option: str, text: str) -> dict[str, Any]:
    value = parse_json(option, text)
    if not isinstance(value, dict):
        raise CliInputError(f"{option} must be a JSON object, got: {text[:80]}")
    return value


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """`--set field=value` (repeatable): the value as JSON when it parses (numbers,
    true, null, lists, objects), else as a string."""
    import json

    changes: dict[str, Any] = {}
    for pair in pairs:
        field, sep, raw = pair.partition("=")
        if not sep or not field.strip():
            raise CliInputError(f"--set wants FIELD=VALUE, got {pair!r}")
        try:
            changes[field.strip()] = json.loads(raw)
        except ValueError:
            changes[field.strip()] = raw
    if not changes:
        raise CliInputError("nothing to change: pass --set FIELD=VALUE (repeatable)")
    return changes


def parse_floats(option: str, text: str) -> list[float]:
    try:
        return [float(s) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        raise CliInputError(f"{option} wants comma-separated numbers, got {text!r}") from exc


def read_json_file(option: str, path: str) -> Any:
    import json

    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as exc:
        raise CliInputError(f"{option}: cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise CliInputError(f"{option}: {path} is not valid JSON ({exc})") from exc


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()
