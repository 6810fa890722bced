"""/metrics behind an optional token, and /docs and /openapi.json switchable off
(issue #21, item 5)."""

from fastapi import FastAPI
from pydantic import SecretStr

from control.app import create_app
from control.settings import ControlSettings
from tests.fixtures.db import TransactionBoundDatabase, _client


def test_metrics_need_the_metrics_token_when_one_is_set(
    control_app: FastAPI,
    control_settings: ControlSettings,
    bound_database: TransactionBoundDatabase,
    admin_headers: dict[str, str],
) -> None:
    settings = control_settings.model_copy(update={"metrics_token": SecretStr("scrape-me")})
    with _client(control_app, settings, bound_database) as client:
        assert client.get("/metrics").status_code == 401
        wrong = client.get("/metrics", headers=admin_headers)
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_token"
        scraped = client.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
        assert scraped.status_code == 200
        assert "specroute_control_auth_failures_total" in scraped.text
    with _client(control_app, control_settings, bound_database) as client:
        assert client.get("/metrics").status_code == 200  # unset: open, as before


def test_docs_and_openapi_can_be_switched_off(
    control_settings: ControlSettings, bound_database: TransactionBoundDatabase
) -> None:
    from fastapi.testclient import TestClient

    for enabled, status in ((True, 200), (False, 404)):
        settings = control_settings.model_copy(update={"docs_enabled": enabled})
        app = create_app(settings, database=bound_database)
        with TestClient(app) as client:
            seen = [client.get(p).status_code for p in ("/docs", "/redoc", "/openapi.json")]
        assert seen == [status] * 3
        # The document itself still exists for the code that builds on it.
        assert "/admin/v1/pools" in app.openapi()["paths"]
