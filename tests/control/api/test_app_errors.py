"""The app's single error handler: typed bodies for unknown routes, integrity
errors and database outages (all real failures, no mocks)."""

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.orm import Session

from control.app import create_app
from control.db import Database
from control.models import AuditEvent, Pair
from control.settings import DEV_ADMIN_TOKEN, ControlSettings
from tests.fixtures.db import TransactionBoundDatabase


def test_unknown_route_is_a_typed_404(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    # Without a token, 401 like every admin path: routes are not an oracle either.
    assert app_client.get("/admin/v1/no-such-thing").status_code == 401
    response = app_client.get("/admin/v1/no-such-thing", headers=admin_headers)
    assert response.status_code == 404
    body = response.json()
    assert body["error"]["type"] == "not_found_error"
    assert body["error"]["code"] == "not_found"


def test_a_trailing_slash_is_a_typed_404_not_a_redirect(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    response = app_client.get("/admin/v1/pairs/", headers=admin_headers, follow_redirects=False)
    assert response.status_code == 404 and "location" not in response.headers
    assert response.json()["error"] | {"details": None, "field_errors": None} == {
        "message": "Not Found: the API's paths have no trailing slash; use /admin/v1/pairs",
        "type": "not_found_error",
        "code": "not_found",
        "param": None,
        "details": None,
        "field_errors": None,
    }
    assert app_client.get("/admin/v1/pairs", headers=admin_headers).status_code == 200


def test_wrong_method_is_a_typed_405(app_client: TestClient, admin_headers: dict[str, str]) -> None:
    response = app_client.put("/admin/v1/pairs", headers=admin_headers)
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_app_keeps_the_database_on_state(app_client: TestClient) -> None:
    assert isinstance(app_client.app.state.database, Database)  # type: ignore[attr-defined]


def _probe_app(database: Database, settings: ControlSettings) -> TestClient:
    app = create_app(settings, database=database)

    @app.get("/admin/v1/_probe")
    def probe() -> dict[str, int]:
        with app.state.database.session() as s:
            return {"one": int(s.execute(text("SELECT 1")).scalar_one())}

    @app.post("/admin/v1/_duplicate")
    def duplicate() -> dict[str, str]:
        with app.state.database.session() as s:
            s.add(Pair(name="same"))
            s.flush()
            s.add(Pair(name="same"))
            s.flush()
        return {}

    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(
    "url",
    [
        # NOTE: port 1 refuses connections, and a file under a missing directory
        # cannot be opened: real connect failures, no mock.
        "postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2",
        "sqlite:////nonexistent-dir/control.db",
    ],
)
def test_unreachable_database_is_503_with_retry_after(url: str) -> None:
    with _probe_app(Database(url), ControlSettings(database_url=url, dev_tokens=True)) as client:
        # The bootstrap token: authenticated without the database, then the route needs it.
        dev = {"Authorization": f"Bearer {DEV_ADMIN_TOKEN}"}
        response = client.get("/admin/v1/_probe", headers=dev)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    assert response.json()["error"]["code"] == "database_unavailable"


def test_integrity_error_is_409(
    bound_database: TransactionBoundDatabase,
    control_settings: ControlSettings,
    session: Session,
    admin_headers: dict[str, str],
) -> None:
    with _probe_app(bound_database, control_settings) as client:
        # Authenticated: control refuses a body from an unknown caller before the route.
        response = client.post("/admin/v1/_duplicate", headers=admin_headers)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "integrity"
    assert session.query(Pair).count() == 0


def test_session_fixture_rolls_back_between_tests_part1(session: Session) -> None:
    session.add(AuditEvent(actor="t", action="probe", entity_type="x", entity_id="1"))
    session.commit()
    assert session.query(AuditEvent).filter_by(action="probe").count() == 1


def test_session_fixture_rolls_back_between_tests_part2(session: Session) -> None:
    assert session.query(AuditEvent).filter_by(action="probe").count() == 0
