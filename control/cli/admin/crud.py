"""list / show / update / delete commands, the same for every resource: by name or
id, `-o table|json|yaml`, If-Match from a fresh GET (or --if-match)."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import typer

from control.cli.admin.output import Column, Output, OutputOption, emit_document, emit_line
from control.cli.admin.output import emit_rows as emit_rows
from control.cli.admin.session import client, parse_sets, run

if TYPE_CHECKING:
    from specwire.admin_client import Resource

IfMatchOption: Any = typer.Option(
    None, "--if-match", help="The version (ETag) you read; 412 if it changed since."
)
SetOption: Any = typer.Option(
    ..., "--set", help="FIELD=VALUE to change (repeatable; VALUE is JSON or a string)."
)


def resource(attr: str) -> "Resource":
    found: Resource = getattr(client(), attr)
    return found


def add_list(
    app: typer.Typer, attr: str, columns: Sequence[Column], doc: str, by_name: bool = True
) -> None:
    def list_(
        name: str | None = typer.Option(None, "--name", help="Only this name."),
        output: Output = OutputOption,
    ) -> None:
        filters = {"name": name} if name else {}
        rows = run(lambda: list(resource(attr).list(**filters)))
        emit_rows(rows, columns, output)

    def list_all(output: Output = OutputOption) -> None:
        emit_rows(run(lambda: list(resource(attr).list())), columns, output)

    command = list_ if by_name else list_all
    command.__doc__ = doc
    app.command("list")(command)


def add_show(app: typer.Typer, attr: str, noun: str) -> None:
    def show(
        ident: str = typer.Argument(..., metavar="NAME_OR_ID", help=f"The {noun}'s name or id."),
        output: Output = OutputOption,
    ) -> None:
        doc = run(lambda: resource(attr).find(ident))
        emit_document(doc, output, title=f"{noun} {doc.get('name', doc.get('id', ident))}")

    show.__doc__ = f"One {noun}, by name or id."
    app.command("show")(show)


def add_update(app: typer.Typer, attr: str, noun: str, fields: str) -> None:
    def update(
        ident: str = typer.Argument(..., metavar="NAME_OR_ID", help=f"The {noun}'s name or id."),
        sets: list[str] = SetOption,
        if_match: str | None = IfMatchOption,
        output: Output = OutputOption,
    ) -> None:
        doc = run(lambda: resource(attr).update(ident, parse_sets(sets), if_match=if_match))
        emit_document(doc, output, title=f"{noun} {doc.get('name', ident)} updated")

    update.__doc__ = f"Change a {noun}: --set FIELD=VALUE for {fields}."
    app.command("update")(update)


def add_delete(app: typer.Typer, attr: str, noun: str) -> None:
    def delete(
        ident: str = typer.Argument(..., metavar="NAME_OR_ID", help=f"The {noun}'s name or id."),
        if_match: str | None = IfMatchOption,
        output: Output = OutputOption,
    ) -> None:
        def go() -> int:
            ident_no = resource(attr).id_of(ident)
            resource(attr).delete(ident_no, if_match=if_match)
            return ident_no

        deleted = run(go)
        emit_line({"deleted": deleted}, output, f"{noun} {ident} (id {deleted}) deleted")

    delete.__doc__ = f"Delete a {noun} (refused while something refers to it)."
    app.command("delete")(delete)


def add_crud(
    app: typer.Typer,
    attr: str,
    noun: str,
    columns: Sequence[Column],
    list_doc: str,
    update_fields: str | None = None,
    delete: bool = False,
) -> None:
    add_list(app, attr, columns, list_doc)
    add_show(app, attr, noun)
    if update_fields:
        add_update(app, attr, noun, update_fields)
    if delete:
        add_delete(app, attr, noun)
