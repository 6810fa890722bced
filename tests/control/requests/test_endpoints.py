"""Per-request records through the real API: stored from telemetry batches once, read
back by request id and by filters, bounds checked at the boundary."""

from datetime import datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.models import RequestRecordRow
from specwire.digest import canonical_digest
from tests.control.requests.records import T0, batch, post, record


def test_records_are_stored_once_and_read_back_by_request_id(
    app_client: TestClient,
    admin_headers: dict[str, str],
    internal_headers: dict[str, str],
    session: Session,
) -> None:
    resp = post(app_client, internal_headers, batch([record("req-1"), record("req-2")]))
    assert resp.status_code == 200, resp.text
    assert resp.json()["requests_stored"] == 2
    # A replay of the batch (lost ack) stores nothing again.
    again = post(app_client, internal_headers, batch([record("req-1"), record("req-2")]))
    assert again.status_code == 200 and again.json()["requests_stored"] == 0
    assert session.scalar(select(func.count()).select_from(RequestRecordRow)) == 2

    got = app_client.get("/admin/v1/requests/req-1", headers=admin_headers)
    assert got.status_code == 200, got.text
    body = got.json()
    assert got.headers["x-records-with-id"] == "1"
    assert body["gateway_id"] == "gw-a"
    assert (body["arm"], body["reason"], body["rollout_id"], body["rollout_version"]) == (
        "spec",
        "cohort_spec",
        11,
        2,
    )
    assert body["sampling"]["temperature"] == 0.7 and body["sampling"]["stop_count"] == 2
    assert body["sampling"]["seed_present"] is True
    assert body["accepted_per_position"] == [8, 6, 4]
    assert (body["ttft_ms"], body["tpot_ms"], body["e2e_ms"]) == (40.0, 6.5, 228.5)
    assert datetime.fromisoformat(body["received_at"]) == T0


def test_unknown_request_is_a_typed_404_and_a_bad_id_a_422(
    app_client: TestClient, admin_headers: dict[str, str]
) -> None:
    missing = app_client.get("/admin/v1/requests/nope", headers=admin_headers)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "request_not_found"
    bad = app_client.get("/admin/v1/requests/a%20b", headers=admin_headers)
    assert bad.status_code == 422


def test_a_reused_request_id_shows_the_newest_and_the_listing_shows_all(
    app_client: TestClient, admin_headers: dict[str, str], internal_headers: dict[str, str]
) -> None:
    later = (T0 + timedelta(minutes=5)).isoformat()
    post(app_client, internal_headers, batch([record("dup", http_status=200)]))
    post(
        app_client,
        internal_headers,
        batch(
            [record("dup", received_at=later, outcome="error", http_status=504)],
            start=T0 + timedelta(minutes=5),
        ),
    )
    got = app_client.get("/admin/v1/requests/dup", headers=admin_headers)
    assert got.json()["http_status"] == 504 and got.headers["x-records-with-id"] == "2"
    listed = app_client.get(
        "/admin/v1/requests", params={"request_id": "dup"}, headers=admin_headers
    )
    assert [r["http_status"] for r in listed.json()["items"]] == [504, 200]


def test_listing_filters_by_tenant_segment_arm_outcome_and_time(
    app_client: TestClient, admin_headers: dict[str, str], internal_headers: dict[str, str]
) -> None:
    records = [
        record("a", received_at=(T0 + timedelta(seconds=1)).isoformat()),
        record(
            "b",
            adapter="tiny-sql",
            arm="baseline",
            reason="cohort_baseline",
            received_at=(T0 + timedelta(seconds=2)).isoformat(),
        ),
        record(
            "c", tenant_id=5, tenant="globex", received_at=(T0 + timedelta(seconds=3)).isoformat()
        ),
        record(
            "d",
            segment_id=None,
            segment=None,
            reason="no_segment",
            arm="baseline",
            received_at=(T0 + timedelta(seconds=4)).isoformat(),
        ),
        record(
            "e",
            outcome="error",
            http_status=502,
            error_code="stream_broken",
            received_at=(T0 + timedelta(seconds=5)).isoformat(),
        ),
    ]
    assert post(app_client, internal_headers, batch(records)).status_code == 200

    def ids(**params: Any) -> list[str]:
        resp = app_client.get("/admin/v1/requests", params=params, headers=admin_headers)
        assert resp.status_code == 200, resp.text
        return [r["request_id"] for r in resp.json()["items"]]

    assert ids() == ["e", "d", "c", "b", "a"]
    assert ids(tenant="globex") == ["c"] and ids(tenant_id=5) == ["c"]
    assert ids(segment_id=3, tenant="acme") == ["e", "b", "a"]
    assert ids(arm="baseline") == ["d", "b"]
    assert ids(adapter="tiny-sql") == ["b"]
    assert ids(outcome="error") == ["e"] and ids(status=502) == ["e"]
    assert ids(
        since=(T0 + timedelta(seconds=2)).isoformat(), until=(T0 + timedelta(seconds=4)).isoformat()
    ) == ["c", "b"]
    # A timestamp without an offset reads as UTC.
    assert ids(since="2026-11-30T12:00:04") == ["e", "d"]
    # Cursor pagination: newest first, the cursor continues below the last id.
    first = app_client.get("/admin/v1/requests", params={"limit": 2}, headers=admin_headers).json()
    assert [r["request_id"] for r in first["items"]] == ["e", "d"]
    rest = app_client.get(
        "/admin/v1/requests",
        params={"limit": 10, "cursor": first["next_cursor"]},
        headers=admin_headers,
    ).json()
    assert [r["request_id"] for r in rest["items"]] == ["c", "b", "a"]
    assert rest["next_cursor"] is None
    bad_arm = app_client.get("/admin/v1/requests", params={"arm": "maybe"}, headers=admin_headers)
    assert bad_arm.status_code == 422


def test_seed_digests_and_engine_build_are_stored_and_served(
    app_client: TestClient,
    admin_headers: dict[str, str],
    internal_headers: dict[str, str],
    session: Session,
) -> None:
    stop = canonical_digest(["END"])
    schema = canonical_digest({"response_format": {"type": "json_object"}})
    sampling = {"seed_present": True, "seed": 2**63 - 1, "stop_count": 1, "stop_digest": stop}
    build = "vllm 0.32.0; specroute 0.1.0 (vllm_fix)"
    doc = record("repro", engine_build=build, sampling=sampling | {"schema_digest": schema})
    assert post(app_client, internal_headers, batch([doc])).status_code == 200
    row = session.scalars(select(RequestRecordRow)).one()
    assert row.engine_build == build
    assert (row.sampling["seed"], row.sampling["stop_digest"]) == (2**63 - 1, stop)
    assert (row.sampling["schema_digest"], row.sampling["logit_bias_digest"]) == (schema, None)
    body = app_client.get("/admin/v1/requests/repro", headers=admin_headers).json()
    assert body["engine_build"] == build and body["sampling"]["seed"] == 2**63 - 1
    assert body["sampling"]["stop_digest"] == stop


def test_a_digest_field_holds_only_a_digest(
    app_client: TestClient, internal_headers: dict[str, str], session: Session
) -> None:
    """A gateway bug must not turn a digest field into a place for stop text."""
    leak = record("leak", sampling={"stop_count": 1, "stop_digest": "sha256:END"})
    resp = post(app_client, internal_headers, batch([leak]))
    assert resp.status_code == 422 and "stop_digest" in resp.text
    assert session.scalar(select(func.count()).select_from(RequestRecordRow)) == 0


def test_record_bounds_are_checked_at_the_boundary(
    app_client: TestClient, internal_headers: dict[str, str], session: Session
) -> None:
    nul = post(app_client, internal_headers, batch([record("x", model="ti\x00ny")]))
    assert nul.status_code == 422 and "requests.0.model" in nul.text
    huge = post(app_client, internal_headers, batch([record("y", prompt_tokens=2**40)]))
    assert huge.status_code == 422 and "requests.0.prompt_tokens" in huge.text
    assert session.scalar(select(func.count()).select_from(RequestRecordRow)) == 0


def test_reading_records_needs_a_token(app_client: TestClient) -> None:
    assert app_client.get("/admin/v1/requests").status_code == 401
    assert app_client.get("/admin/v1/requests/req-1").status_code == 401


def test_tenant_sample_rate_is_set_bounded_and_compiled_into_the_snapshot(
    app_client: TestClient, admin_headers: dict[str, str], internal_headers: dict[str, str]
) -> None:
    made = app_client.post(
        "/admin/v1/tenants",
        json={"name": "acme", "request_sample_rate": 0.25},
        headers=admin_headers,
    )
    assert made.status_code == 201 and made.json()["request_sample_rate"] == 0.25
    default = app_client.post("/admin/v1/tenants", json={"name": "globex"}, headers=admin_headers)
    assert default.json()["request_sample_rate"] == 1.0
    bad = app_client.post(
        "/admin/v1/tenants", json={"name": "x", "request_sample_rate": 1.5}, headers=admin_headers
    )
    assert bad.status_code == 422
    tid = made.json()["id"]
    patched = app_client.patch(
        f"/admin/v1/tenants/{tid}",
        json={"request_sample_rate": 0.0},
        headers={**admin_headers, "If-Match": '"1"'},
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["request_sample_rate"] == 0.0
    snapshot = app_client.get("/internal/v1/snapshot", headers=internal_headers).json()
    rates = {t["name"]: t["request_sample_rate"] for t in snapshot["tenants"]}
    assert rates == {"acme": 0.0, "globex": 1.0}
