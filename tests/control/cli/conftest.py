"""A real control plane over HTTP (uvicorn in a thread, SQLite) for the CLI tests, and
the `specroute admin` runner the tests drive it with."""

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner, Result

from control.app import create_app
from control.cli import app as root
from control.migrate import current_revision
from control.settings import ControlSettings

TOKEN = "cli-test-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    migrated = CliRunner().invoke(root, ["control", "migrate", "--database-url", url])
    assert migrated.exit_code == 0, migrated.output
    assert current_revision(url) is not None
    assert "database at revision" in migrated.output

    settings = ControlSettings(
        database_url=url,
        admin_token=TOKEN,
        internal_token="cli-internal",
        data_dir=tmp_path,
        model_roots=[tmp_path],
    )
    port = _free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="error")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def cli(server: str) -> Callable[..., Result]:
    """`specroute admin ARGS...` against `server`, with the admin token."""
    runner = CliRunner(
        env={"SPECROUTE_ADMIN_URL": server, "SPECROUTE_ADMIN_TOKEN": TOKEN, "COLUMNS": "200"}
    )

    def invoke(*args: str) -> Result:
        return runner.invoke(root, ["admin", *args])

    return invoke


def ok(cli: Callable[..., Result], *args: str) -> str:
    result = cli(*args)
    assert result.exit_code == 0, result.output
    return result.output


def as_json(cli: Callable[..., Result], *args: str) -> Any:
    return json.loads(ok(cli, *args, "-o", "json"))


def refused(cli: Callable[..., Result], code: int, *args: str) -> str:
    """The command fails with `code` and says why in one line, without a traceback."""
    result = cli(*args)
    assert result.exit_code == code, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    return result.output.strip()
