"""How admin commands print: `-o table` (rich tables that fold to the terminal's
width; actions print one summary line), `-o json` / `-o yaml` (the API's own
documents, for scripts). rich and PyYAML are imported only when they print."""

import json
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

import typer


class Output(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


OutputOption: Any = typer.Option(
    Output.table,
    "--output",
    "-o",
    help="table (folds to the terminal's width), json or yaml (the API's documents).",
)

Column = tuple[str, str | Callable[[dict[str, Any]], Any]]


def group(help: str, no_args_is_help: bool = True) -> typer.Typer:
    """A command group with plain (click) help: rich's help formatter alone takes
    about 0.1 s to import, a third of `admin --help`'s budget."""
    return typer.Typer(help=help, no_args_is_help=no_args_is_help, rich_markup_mode=None)


def console() -> Any:
    """Built on each use, so the terminal width (COLUMNS) is read when printing.
    Soft wrap keeps messages on one line for scripts that grep them."""
    from rich.console import Console

    return Console(soft_wrap=True)


def table(*headers: str, title: str | None = None) -> Any:
    """Columns fold long values onto more lines instead of cutting them to '…'."""
    from rich.table import Table

    out = Table(title=title)
    for header in headers:
        out.add_column(header, overflow="fold")
    return out


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _value(row: dict[str, Any], getter: str | Callable[[dict[str, Any]], Any]) -> str:
    return cell(row.get(getter) if isinstance(getter, str) else getter(row))


def emit_data(doc: Any, output: Output) -> None:
    if output is Output.yaml:
        import yaml

        typer.echo(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).rstrip("\n"))
    else:
        typer.echo(json.dumps(doc, indent=2))


def emit(doc: Any, output: Output, render: Callable[[], None]) -> None:
    """The document as JSON/YAML, or `render()` for the table form."""
    if output is Output.table:
        render()
    else:
        emit_data(doc, output)


def emit_rows(rows: Sequence[dict[str, Any]], columns: Sequence[Column], output: Output) -> None:
    def render() -> None:
        out = table(*(header for header, _ in columns))
        for row in rows:
            out.add_row(*(_value(row, getter) for _, getter in columns))
        console().print(out)

    emit(list(rows), output, render)


def emit_document(doc: dict[str, Any], output: Output, title: str | None = None) -> None:
    """One document: a field / value table, nested values as compact JSON."""

    def render() -> None:
        out = table("field", "value", title=title)
        for key, value in doc.items():
            out.add_row(key, cell(value))
        console().print(out)

    emit(doc, output, render)


def emit_line(doc: Any, output: Output, line: str) -> None:
    """An action's answer: one summary line, or the document."""
    emit(doc, output, lambda: typer.echo(line))
