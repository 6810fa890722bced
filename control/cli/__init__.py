"""The `specroute` command.

Sub-command groups register through the `specroute.commands` entry-point group
(see pyproject.toml), so this package does not import gateway or engine code:
each group lives with the package it drives and is imported only when it runs.
`specroute admin ...` therefore never pays for the demo's plotting libraries,
and `specroute --help` reads each group's one-line help from its source
without importing it.

The groups this distribution declares are also listed in `OWN_GROUPS` (a test
keeps it equal to pyproject.toml's), so running one of them needs no scan of
every installed package's metadata (importlib.metadata costs ~0.1 s); the
entry points are read for the full listing and for names not in the table.

Usage errors (an unknown option or command, a bad choice, a missing argument, a
value that is not a number) are one line on stderr with exit 2, for every
sub-command: `LazyGroup` turns click's three lines (Usage / Try / Error) into
`error: No such option: --bogus (try 'specroute admin pool list --help')`.
"""

import ast
from functools import cache
from importlib import import_module
from importlib.util import find_spec
from pathlib import Path
from types import TracebackType
from typing import IO, Any, NamedTuple

import typer
from typer._click import Command, Context, HelpFormatter, echo  # typer 0.29 vendors click
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command

from control.cli.light_params import lighten

OWN_GROUPS = {
    "admin": "control.cli.admin:app",
    "beat": "control.cli.celery:beat",
    "bench": "bench.cli:app",
    "control": "control.cli.control:app",
    "demo": "demo.command:demo",
    "engine": "engine.cli:app",
    "gateway": "gateway.cli:app",
    "stack": "control.cli.stack:app",
    "worker": "control.cli.celery:worker",
}


class Group(NamedTuple):
    """An entry point's target, `module:attr`, loaded on demand."""

    module: str
    attr: str

    @classmethod
    def of(cls, value: str) -> "Group":
        module, _, attr = value.partition(":")
        return cls(module.strip(), attr.strip())

    def load(self) -> Any:
        return getattr(import_module(self.module), self.attr)


@cache
def _groups() -> dict[str, Group]:
    from importlib.metadata import entry_points

    found = {ep.name: Group.of(ep.value) for ep in entry_points(group="specroute.commands")}
    return {name: Group.of(value) for name, value in OWN_GROUPS.items()} | found


def _group(name: str) -> Group | None:
    if name in OWN_GROUPS:
        return Group.of(OWN_GROUPS[name])
    return _groups().get(name)


# Groups whose code the wheel leaves out (generic top-level names): they run from a
# checkout, whose root is then on the import path.
CHECKOUT_GROUPS = {"bench", "demo"}


def _installed(ep: Group) -> bool:
    try:
        return find_spec(ep.module) is not None
    except ModuleNotFoundError:  # the package above it is missing
        return False


def needs_checkout(name: str) -> Command:
    """What `specroute bench`/`demo` are where only the wheel is installed: a clear error."""

    def explain() -> None:
        typer.echo(
            f"specroute {name}: needs a checkout of the specroute repository ({name}/ is not "
            f"installed with the package); from the checkout's root run "
            f"`PYTHONPATH=. specroute {name} ...`",
            err=True,
        )
        raise typer.Exit(2)

    single = typer.Typer()
    single.command(
        name=name,
        help="(needs a checkout of the repository)",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )(explain)
    command = get_command(single)
    command.name = name
    return command


def short_help(ep: Group) -> str:
    """The group's `typer.Typer(help=...)` or the command function's docstring, first
    line, read from the module's source (no import)."""
    if not _installed(ep):
        return "(needs a checkout of the repository)"
    spec = find_spec(ep.module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return ""
    tree = ast.parse(Path(spec.origin).read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == ep.attr:
            return (ast.get_docstring(node) or "").split("\n", 1)[0]
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == ep.attr for t in node.targets)
            and isinstance(node.value, ast.Call)
        ):
            for kw in node.value.keywords:
                if kw.arg == "help" and isinstance(kw.value, ast.Constant):
                    return str(kw.value.value).split("\n", 1)[0]
    return ""


def load_command(name: str, ep: Group) -> Command:
    target = ep.load()
    if isinstance(target, typer.Typer):
        command = get_command(target)
    else:
        single = typer.Typer()
        single.command(name=name)(target)
        command = get_command(single)
    command.name = name
    return lighten(command)


def _context_of(error: UsageError) -> Context | None:
    """The context of the command whose arguments were wrong. click's parser raises
    some errors without one (`Option '--x' requires an argument.`); the innermost
    frame that had a `ctx` (the failing command's parse_args) names it then."""
    if error.ctx is not None:
        return error.ctx
    found: Context | None = None
    tb: TracebackType | None = error.__traceback__
    while tb is not None:
        ctx = tb.tb_frame.f_locals.get("ctx")
        if isinstance(ctx, Context):
            found = ctx
        tb = tb.tb_next
    return found


class UsageLine(UsageError):
    """A usage error shown as one line: `error: MESSAGE (try 'COMMAND --help')`."""

    def __init__(self, error: UsageError) -> None:
        super().__init__(error.message, _context_of(error))
        self.exit_code = error.exit_code
        self.error = error

    def format_message(self) -> str:
        return " ".join(self.error.format_message().split())

    def show(self, file: IO[Any] | None = None) -> None:
        hint = ""
        if self.ctx is not None and self.ctx.command.get_help_option(self.ctx) is not None:
            hint = f" (try '{self.ctx.command_path} {self.ctx.help_option_names[0]}')"
        echo(f"error: {self.format_message()}{hint}", file=file, err=True)


def _one_line(error: UsageError) -> UsageError:
    # A group run without a command prints its help (NoArgsIsHelpError): not one line.
    if isinstance(error, NoArgsIsHelpError | UsageLine):
        return error
    return UsageLine(error)


class LazyGroup(TyperGroup):
    """Imports a command group only when it is invoked (or its own help is asked).
    While the top-level help is rendered, each group is a placeholder carrying the
    one-line help read from its source."""

    listing = False

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        lighten(self, ctx)  # the root's own options (help, completion), before they convert
        try:
            return super().parse_args(ctx, args)
        except UsageError as error:
            raise _one_line(error) from error

    def invoke(self, ctx: Context) -> Any:
        """Runs the sub-command; its usage errors (and its sub-commands') as one line."""
        try:
            return super().invoke(ctx)
        except UsageError as error:
            raise _one_line(error) from error

    def list_commands(self, ctx: Context) -> list[str]:
        return sorted(_groups())

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        ep = _group(cmd_name)
        if ep is None:
            return None
        if self.listing:
            return TyperCommand(cmd_name, help=short_help(ep))
        if cmd_name in CHECKOUT_GROUPS and not _installed(ep):
            return needs_checkout(cmd_name)
        return load_command(cmd_name, ep)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False


app = typer.Typer(
    cls=LazyGroup,
    help="specroute: policy-driven speculative decoding.",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help and usage errors: no rich import, no boxes in pipes
)


@app.callback()
def _root() -> None:
    """specroute: policy-driven speculative decoding."""
    from control.cli.pidfiles import register_from_argv

    register_from_argv()
