"""click's usage errors are one line on stderr with exit 2, under every group: the
unknown option, the bad choice, the missing argument, the non-integer id, the
unknown command (issue #24: one-line errors for every bad input)."""

import pytest
from typer.testing import CliRunner

from control.cli import app as root

# No control plane runs: every one of these is refused before a request is made.
ENV = {"SPECROUTE_ADMIN_URL": "http://127.0.0.1:9", "SPECROUTE_ADMIN_TOKEN": "t"}

CASES = [
    (
        ["admin", "pool", "list", "--bogus"],
        "error: No such option: --bogus (try 'specroute admin pool list --help')",
    ),
    (
        ["admin", "pool", "list", "-o", "xml"],
        "error: Invalid value for '--output' / '-o': Value error, 'xml' is not one of "
        "'table', 'json', 'yaml'. (try 'specroute admin pool list --help')",
    ),
    (
        ["admin", "pool", "show"],
        "error: Missing argument 'NAME_OR_ID'. (try 'specroute admin pool show --help')",
    ),
    (
        ["admin", "decision", "record", "abc"],
        "error: Invalid value for 'decision_id': Input should be a valid integer, unable to "
        "parse string as an integer (try 'specroute admin decision record --help')",
    ),
    (
        ["admin", "pair", "retire", "tiny", "x"],
        "error: Invalid value for 'version_id': Input should be a valid integer, unable to "
        "parse string as an integer (try 'specroute admin pair retire --help')",
    ),
    (
        ["admin", "audit", "--limit", "ten"],
        "error: Invalid value for '--limit': Input should be a valid integer, unable to "
        "parse string as an integer (try 'specroute admin audit --help')",
    ),
    (
        ["admin", "nosuch"],
        "error: No such command 'nosuch'. (try 'specroute admin --help')",
    ),
    (["nosuch"], "error: No such command 'nosuch'. (try 'specroute --help')"),
    (["--bogus"], "error: No such option: --bogus (try 'specroute --help')"),
    # click's parser raises this one without a context; the hint still names the command.
    (
        ["admin", "evaluation", "create", "--results"],
        "error: Option '--results' requires an argument. "
        "(try 'specroute admin evaluation create --help')",
    ),
    (
        ["admin", "--url"],
        "error: Option '--url' requires an argument. (try 'specroute admin --help')",
    ),
]


@pytest.mark.parametrize(("args", "line"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_usage_errors_are_one_line_with_exit_2(args: list[str], line: str) -> None:
    result = CliRunner(env=ENV).invoke(root, args, prog_name="specroute")
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", line + "\n")
    assert isinstance(result.exception, SystemExit)


def test_a_group_without_a_command_still_prints_its_help() -> None:
    result = CliRunner(env=ENV).invoke(root, ["admin"], prog_name="specroute")
    assert result.exit_code == 2
    assert result.stderr.startswith("Usage: specroute admin [OPTIONS] COMMAND [ARGS]...")
    assert "pool" in result.stderr and "error:" not in result.stderr
