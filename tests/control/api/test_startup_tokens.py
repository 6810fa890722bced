"""No well-known default tokens: control and gateway refuse to start without their
tokens unless an explicit dev flag is given, and say so loudly when it is."""

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from control.app import create_app
from control.cli import app as root
from control.migrate import upgrade
from control.settings import DEV_ADMIN_TOKEN, ControlSettings, MissingTokens
from gateway.app import create_app as create_gateway
from gateway.settings import GatewaySettings, MissingToken


def _migrated(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    upgrade(url)
    return url


UNSET = {"SPECROUTE_ADMIN_TOKEN": None, "SPECROUTE_INTERNAL_TOKEN": None}


def test_control_serve_refuses_to_start_without_tokens(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    result = CliRunner(env=UNSET | {"SPECROUTE_DEV_TOKENS": None}).invoke(
        root, ["control", "serve", "--database-url", url, "--no-migrate"]
    )
    assert result.exit_code == 2
    assert "refusing to start" in result.output
    assert "SPECROUTE_ADMIN_TOKEN and SPECROUTE_INTERNAL_TOKEN must be set" in result.output
    # Refused before serving or migrating: no database was created.
    assert not (tmp_path / "control.db").exists()


def test_one_missing_token_is_enough_to_refuse(tmp_path: Path) -> None:
    settings = ControlSettings(data_dir=tmp_path, admin_token="a-real-admin-token")
    with pytest.raises(MissingTokens, match=r"^SPECROUTE_INTERNAL_TOKEN must be set"):
        create_app(settings)


def test_dev_flag_accepts_the_dev_tokens_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = ControlSettings(data_dir=tmp_path, database_url=_migrated(tmp_path), dev_tokens=True)
    with caplog.at_level(logging.WARNING, logger="specroute.control"):
        app = create_app(settings)
    assert any("DEV TOKENS ON" in r.getMessage() for r in caplog.records)
    client = TestClient(app, raise_server_exceptions=False)
    response = client.get(
        "/admin/v1/admin-tokens", headers={"Authorization": f"Bearer {DEV_ADMIN_TOKEN}"}
    )
    assert response.status_code == 200
    assert response.json() == {"items": [], "next_cursor": None}
    assert client.get("/admin/v1/admin-tokens").status_code == 401


def test_explicit_tokens_start_quietly_and_dev_tokens_are_not_accepted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = ControlSettings(
        data_dir=tmp_path,
        database_url=_migrated(tmp_path),
        admin_token="adm-1",
        internal_token="int-1",
    )
    with caplog.at_level(logging.WARNING, logger="specroute.control"):
        app = create_app(settings)
    assert not any("DEV TOKENS" in r.getMessage() for r in caplog.records)
    client = TestClient(app, raise_server_exceptions=False)
    denied = client.get(
        "/admin/v1/admin-tokens", headers={"Authorization": f"Bearer {DEV_ADMIN_TOKEN}"}
    )
    assert denied.status_code == 401
    allowed = client.get("/admin/v1/admin-tokens", headers={"Authorization": "Bearer adm-1"})
    assert allowed.status_code == 200


def test_gateway_refuses_to_poll_control_without_a_token() -> None:
    with pytest.raises(MissingToken, match="SPECROUTE_GATEWAY_INTERNAL_TOKEN must be set"):
        create_gateway(GatewaySettings(control_url="http://127.0.0.1:1"))
    # Standalone file mode without telemetry never talks to control: no token needed.
    standalone = GatewaySettings(snapshot_file=Path("snapshot.json"))
    assert standalone.internal_secret() == ""
    with pytest.raises(MissingToken):
        GatewaySettings(snapshot_file=Path("s.json"), telemetry_enabled=True).internal_secret()
    assert GatewaySettings(dev_tokens=True).internal_secret() == "specroute-internal-dev"


def test_gateway_serve_cli_refuses_without_a_token() -> None:
    from gateway.cli import app as gateway_cli

    env = {"SPECROUTE_GATEWAY_INTERNAL_TOKEN": None, "SPECROUTE_GATEWAY_SNAPSHOT_FILE": None}
    result = CliRunner(env=env).invoke(gateway_cli, ["serve"])
    assert result.exit_code == 2
    assert "refusing to start" in result.output
