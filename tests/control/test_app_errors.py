"""The app's single error handler: typed bodies for unknown routes, validation and
database outages."""

from fastapi.testclient import TestClient
from sqlalchemy import text

from control.app import create_app
from control.db import Database
from control.models import AuditEvent
from control.settings import ControlSettings


def test_unknown_route_is_a_typed_404(app_client: TestClient) -> None:
    response = app_client.get("/admin/v1/no-such-thing")
    assert response.status_code == 404
    body = response.json()
    assert body["error"]["type"] == "not_found_error"
    assert body["error"]["code"] == "not_found"


def test_app_keeps_the_database_on_state(app_client: TestClient) -> None:
    assert isinstance(app_client.app.state.database, Database)  # type: ignore[attr-defined]


def test_unreachable_database_is_503_with_retry_after(tmp_path: object) -> None:
    # NOTE: port 1 refuses connections: a real connect failure, no mock.
    url = "postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2"
    settings = ControlSettings(database_url=url)
    app = create_app(settings, database=Database(url))

    @app.get("/admin/v1/_probe")
    def probe() -> dict[str, int]:
        with app.state.database.session() as s:
            return {"one": int(s.execute(text("SELECT 1")).scalar_one())}

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/admin/v1/_probe")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    assert response.json()["error"]["code"] == "database_unavailable"


def test_session_fixture_rolls_back_between_tests_part1(session: object) -> None:
    from sqlalchemy.orm import Session

    assert isinstance(session, Session)
    session.add(AuditEvent(actor="t", action="probe", entity_type="x", entity_id="1"))
    session.commit()
    assert session.query(AuditEvent).filter_by(action="probe").count() == 1


def test_session_fixture_rolls_back_between_tests_part2(session: object) -> None:
    from sqlalchemy.orm import Session

    assert isinstance(session, Session)
    assert session.query(AuditEvent).filter_by(action="probe").count() == 0
