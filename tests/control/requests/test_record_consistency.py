"""POST /internal/v1/telemetry refuses a request record that accepts more than it
drafted (422 naming the field, nothing stored); records stored before still read."""

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from control.models import RequestRecordRow
from control.telemetry.service import ingest_batch
from specwire import TelemetryBatch
from tests.control.requests.records import batch as records_batch
from tests.control.requests.records import post, record, stored_rows


def test_a_record_accepting_more_than_it_drafted_is_422_naming_the_field(
    app_client: TestClient, session: Session, internal_headers: dict[str, str]
) -> None:
    good = record("r-good")  # 18 of 30 drafted, [8, 6, 4] of 10 drafts
    for bad, param, kind in (
        (record("r-bad", accepted_tokens=31), "requests.1.accepted_tokens", "drafted"),
        (
            record("r-bad", accepted_per_position=[8, 11, 4]),
            "requests.1.accepted_per_position",
            "drafts",
        ),
    ):
        resp = post(app_client, internal_headers, records_batch([good, bad]))
        assert resp.status_code == 422, resp.text
        error = resp.json()["error"]
        assert (error["code"], error["param"]) == ("invalid_value", param)
        assert [e["type"] for e in error["field_errors"]] == [f"accepted_exceeds_{kind}"]
        assert stored_rows(session) == (0, 0, 0)
    edge = record("r-edge", accepted_tokens=30, accepted_per_position=[10, 10, 10])
    stored = post(app_client, internal_headers, records_batch([good, edge]))
    assert (stored.status_code, stored.json()["requests_stored"]) == (200, 2), stored.text
    assert stored_rows(session) == (1, 0, 2)


def test_a_record_stored_before_the_check_still_reads(
    app_client: TestClient, session: Session, admin_headers: dict[str, str]
) -> None:
    batch = TelemetryBatch.model_validate(records_batch([record("r-old")]))
    assert ingest_batch(session, batch).requests_stored == 1
    row = session.scalars(select(RequestRecordRow)).one()
    row.accepted_tokens, row.accepted_per_position = 40, [12, 6, 4]  # of 30 drafted, 10 drafts
    session.commit()
    one = app_client.get("/admin/v1/requests/r-old", headers=admin_headers)
    assert (one.status_code, one.json()["accepted_tokens"]) == (200, 40), one.text
    listed = app_client.get("/admin/v1/requests", headers=admin_headers)
    assert listed.status_code == 200, listed.text
    assert [r["accepted_per_position"] for r in listed.json()["items"]] == [[12, 6, 4]]
