"""Command-line values of the plain kinds (str, bool, an Enum's choices) converted
without pydantic, so `specroute admin ...` starts without importing it.

typer 0.29 converts every parameter's value through a pydantic TypeAdapter built
on first use (`typer._coercion.build_runtime_param`), and even `admin --help`
uses some (the root's completion flags, --url, --token): importing pydantic and
building the adapters was about a third of `admin --help`'s start. `lighten`
gives each such parameter a converter that returns what the adapter would for
the values the CLI actually sees (a str for a str, a bool for a bool, an Enum
member for one of its values, through typer's own choice matching) and hands any
other value to typer's adapter, so typer's conversions and error messages stay
the only ones.

It uses typer's private runtime-parameter hook (`_TyperParameter._runtime_param`,
`typer._coercion`), which is why pyproject.toml pins typer to the minor range it
was tested with. With a typer whose hook is not the one described here (`PROBLEM`
says what is missing), `lighten` does nothing and typer converts as it always did
(slower to start, nothing else changes); tests/control/cli/test_typer_hook.py fails
then, naming the missing part.
"""

from dataclasses import dataclass
from enum import Enum
from typing import Any

from typer._click import Command, Context


def _problem() -> str | None:
    """What this module needs from typer and the installed one lacks; None: nothing."""
    try:
        from typer import _coercion, _param_types, core
    except ImportError as exc:
        return f"typer has no {exc.name}"
    needs = {
        "typer._coercion.RuntimeParam": getattr(_coercion, "RuntimeParam", None),
        "typer._coercion.TypeDescriptor": getattr(_coercion, "TypeDescriptor", None),
        "typer._coercion.build_runtime_param": getattr(_coercion, "build_runtime_param", None),
        "typer._param_types.coerce_cli_choice": getattr(_param_types, "coerce_cli_choice", None),
        "typer.core._TyperParameter": getattr(core, "_TyperParameter", None),
    }
    missing = [name for name, found in needs.items() if found is None]
    if missing:
        return "typer lacks " + ", ".join(missing)
    annotated = getattr(core._TyperParameter, "__annotations__", {})
    for attr in ("_runtime_param", "type_descriptor"):
        if attr not in annotated:
            return f"typer.core._TyperParameter declares no {attr}"
    fields = set(getattr(_coercion.RuntimeParam, "__dataclass_fields__", {}))
    if not {"parameter_info", "annotation"} <= fields:
        return f"typer._coercion.RuntimeParam's fields are {sorted(fields)}"
    return None


PROBLEM = _problem()
_HOOKED = PROBLEM is None
if _HOOKED:
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
    from typer._param_types import coerce_cli_choice
    from typer.core import _TyperParameter


if _HOOKED:

    @dataclass(frozen=True)
    class _Light(RuntimeParam):
        descriptor: TypeDescriptor | None = None

        def _coerce_value(self, value: Any, param: Any, ctx: Context) -> Any:
            kind = self.annotation
            if kind is str and isinstance(value, str):
                return value
            if kind is bool and isinstance(value, bool):
                return value
            if isinstance(kind, type) and issubclass(kind, Enum):
                try:
                    return coerce_cli_choice(
                        value,
                        choices=tuple(kind),
                        case_sensitive=self.parameter_info.case_sensitive,
                        ctx=ctx,
                    )
                except Exception:  # typer's adapter says what is wrong, in its words
                    pass
            assert self.descriptor is not None
            full = build_runtime_param(self.descriptor)
            return full._coerce_value(value, param=param, ctx=ctx)


def _plain(descriptor: Any) -> bool:
    kind = descriptor.annotation
    info = descriptor.parameter_info
    if info.parser is not None or descriptor.file_annotation is not None:
        return False
    return kind is str or kind is bool or (isinstance(kind, type) and issubclass(kind, Enum))


def lighten(command: Command, ctx: Context | None = None) -> Command:
    """`command` (and every sub-command) with pydantic-free conversion of plain values;
    `ctx`, the command's context where one exists already (for its --help's names)."""
    if not _HOOKED:
        return command
    # --help is made on first use and cached; make it now (ours take the default names).
    help_option = command.get_help_option(ctx or Context(command))
    for param in [*command.params, *([help_option] if help_option else [])]:
        if isinstance(param, _TyperParameter) and param._runtime_param is None:
            descriptor = param.type_descriptor
            if _plain(descriptor):
                param._runtime_param = _Light(
                    parameter_info=descriptor.parameter_info,
                    annotation=descriptor.annotation,
                    descriptor=descriptor,
                )
    subcommands: dict[str, Command] = getattr(command, "commands", None) or {}
    for sub in subcommands.values():
        lighten(sub)
    return command
