"""GET /admin/v1/telemetry/acceptance over windows stored through the ingestion API:
exact sums, each filter, the window cap, and the typed errors."""

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from control.clock import use_clock
from control.telemetry.acceptance import window_acceptance
from specwire import Arm
from tests.control.conftest import created
from tests.control.telemetry.windows import post_windows, window
from tests.fixtures.db import INTERNAL_TOKEN

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
URL = "/admin/v1/telemetry/acceptance"
OTHER_PAIR_VERSION = 9999  # a pair version no pool here serves


def _store(client: TestClient, headers: dict[str, str], seeded: dict[str, Any]) -> int:
    """Windows of the rollout's segment (both arms, two gateways, three starts, another
    pair version) and of a second segment; the second segment's id."""
    seg, pv = seeded["segment"]["id"], seeded["version"]["id"]
    rollout = seeded["rollout"]["id"]
    other = created(
        client.post(
            "/admin/v1/segments",
            json={"name": "chat", "selector": {"tasks": ["chat"]}, "priority": 5},
            headers=headers,
        )
    )["id"]
    spec = {"pair_version_id": pv, "rollout_id": rollout}
    minutes = [T0 + timedelta(minutes=m) for m in (1, 10, -120)]
    post_windows(
        client,
        INTERNAL_TOKEN,
        [
            (
                "gw-a",
                window(
                    seg,
                    Arm.SPEC,
                    T0,
                    requests=10,
                    drafts=20,
                    per_position=[15, 10, 5],
                    buckets={"0-15": (40, 25), "16-63": (20, 5)},
                    **spec,
                ),
            ),
            ("gw-a", window(seg, Arm.BASELINE, T0, requests=8, **spec)),
            (
                "gw-a",
                window(
                    other,
                    Arm.SPEC,
                    T0,
                    requests=4,
                    drafts=10,
                    per_position=[5, 3, 2],
                    buckets={"64-255": (50, 10)},
                    pair_version_id=pv,
                ),
            ),
            # An older gateway's window: no buckets, so its tokens read as `unknown`.
            (
                "gw-b",
                window(
                    seg,
                    Arm.SPEC,
                    T0,
                    requests=5,
                    drafts=10,
                    per_position=[6, 4, 2],
                    totals=(30, 12),
                    **spec,
                ),
            ),
            (
                "gw-a",
                window(
                    seg,
                    Arm.SPEC,
                    minutes[0],
                    requests=1,
                    drafts=25,
                    per_position=[25, 25, 25, 25],
                    buckets={"0-15": (100, 100)},
                    pair_version_id=OTHER_PAIR_VERSION,
                ),
            ),
            (
                "gw-a",
                window(
                    seg,
                    Arm.SPEC,
                    minutes[1],
                    requests=2,
                    drafts=3,
                    per_position=[3, 2, 1],
                    buckets={"256+": (9, 6)},
                    **spec,
                ),
            ),
            # Two hours before: outside every range asked below but the widest.
            (
                "gw-a",
                window(
                    seg,
                    Arm.SPEC,
                    minutes[2],
                    requests=3,
                    drafts=9,
                    per_position=[9],
                    buckets={"0-15": (27, 9)},
                    **spec,
                ),
            ),
        ],
    )
    return int(other)


def _get(client: TestClient, headers: dict[str, str], **params: Any) -> Any:
    response = client.get(URL, params=params, headers=headers)
    return response.status_code, response.json()


def _buckets(body: dict[str, Any]) -> dict[str, tuple[int, int, float | None]]:
    return {
        p["bucket"]: (p["drafted_tokens"], p["accepted_tokens"], p["acceptance_rate"])
        for p in body["acceptance_by_response_position"]
    }


HOUR_AROUND_T0 = {
    "since": (T0 - timedelta(hours=1)).isoformat(),
    "until": (T0 + timedelta(hours=1)).isoformat(),
}


def test_a_segments_windows_sum_exactly_by_draft_and_by_response_position(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    _store(app_client, admin_headers, seeded)
    seg = seeded["segment"]["id"]

    status, body = _get(app_client, admin_headers, segment_id=seg, **HOUR_AROUND_T0)

    assert status == 200, body
    # Both arms, both gateways, both pair versions; not the window two hours before.
    assert {k: body[k] for k in ("windows", "requests", "drafts")} == {
        "windows": 5,
        "requests": 10 + 8 + 5 + 1 + 2,
        "drafts": 20 + 10 + 25 + 3,
    }
    assert (body["drafted_tokens"], body["accepted_tokens"]) == (199, 148)
    assert body["acceptance_rate"] == 148 / 199
    assert body["accepted_per_position"] == [15 + 6 + 25 + 3, 10 + 4 + 25 + 2, 5 + 2 + 25 + 1, 25]
    assert body["per_position_rate"] == [49 / 58, 41 / 58, 33 / 58, 25 / 58]
    assert _buckets(body) == {
        "0-15": (140, 125, 125 / 140),
        "16-63": (20, 5, 0.25),
        "64-255": (0, 0, None),
        "256+": (9, 6, 6 / 9),
        "unknown": (30, 12, 0.4),
    }
    assert (body["segment_id"], body["pool_id"], body["pair_version_id"], body["arm"]) == (
        seg,
        None,
        None,
        None,
    )
    assert (body["truncated"], body["read_until"]) == (False, body["until"])
    assert datetime.fromisoformat(body["since"]) == T0 - timedelta(hours=1)


def test_the_arm_pool_segment_and_time_filters_each_narrow_the_sum(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    other = _store(app_client, admin_headers, seeded)
    seg, pv = seeded["segment"]["id"], seeded["version"]["id"]

    # The spec pool selects its pair version's windows: not the other pair version's.
    status, spec = _get(
        app_client,
        admin_headers,
        segment_id=seg,
        arm="spec",
        pool_id=seeded["spec_pool"]["id"],
        **HOUR_AROUND_T0,
    )
    assert status == 200, spec
    assert (spec["windows"], spec["requests"], spec["drafts"]) == (3, 17, 33)
    assert (spec["drafted_tokens"], spec["accepted_tokens"]) == (99, 48)
    assert spec["accepted_per_position"] == [24, 16, 8]
    assert (spec["pair_version_id"], spec["arm"]) == (pv, "spec")
    assert _buckets(spec) == {
        "0-15": (40, 25, 0.625),
        "16-63": (20, 5, 0.25),
        "64-255": (0, 0, None),
        "256+": (9, 6, 6 / 9),
        "unknown": (30, 12, 0.4),
    }

    status, baseline = _get(
        app_client, admin_headers, segment_id=seg, arm="baseline", **HOUR_AROUND_T0
    )
    assert status == 200, baseline
    assert (baseline["windows"], baseline["requests"], baseline["drafted_tokens"]) == (1, 8, 0)
    assert (baseline["acceptance_rate"], baseline["accepted_per_position"]) == (None, [])
    assert baseline["per_position_rate"] == []
    assert {b[2] for b in _buckets(baseline).values()} == {None}

    status, chat = _get(app_client, admin_headers, segment_id=other, **HOUR_AROUND_T0)
    assert status == 200, chat
    assert (chat["windows"], chat["drafted_tokens"], chat["accepted_tokens"]) == (1, 50, 10)
    assert _buckets(chat)["64-255"] == (50, 10, 0.2)

    # [since, until): a window starting at `until` is left out, one at `since` counted.
    status, later = _get(
        app_client,
        admin_headers,
        segment_id=seg,
        since=(T0 + timedelta(minutes=10)).isoformat(),
        until=(T0 + timedelta(hours=1)).isoformat(),
    )
    assert (status, later["windows"], later["drafted_tokens"]) == (200, 1, 9)
    status, before = _get(
        app_client,
        admin_headers,
        segment_id=seg,
        since=(T0 - timedelta(hours=1)).isoformat(),
        until=T0.isoformat(),
    )
    assert (status, before["windows"], before["drafted_tokens"]) == (200, 0, 0)
    assert before["acceptance_rate"] is None
    # A naive timestamp is read as UTC; the widest range takes the old window too.
    status, wide = _get(
        app_client,
        admin_headers,
        segment_id=seg,
        since="2026-03-01T09:00:00",
        until="2026-03-01T13:00:00",
    )
    assert (status, wide["windows"], wide["drafted_tokens"]) == (200, 6, 199 + 27)


def test_without_since_and_until_the_last_hour_is_read(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    _store(app_client, admin_headers, seeded)
    with use_clock(lambda: T0 + timedelta(minutes=30)):
        status, body = _get(app_client, admin_headers, segment_id=seeded["segment"]["id"])
    assert status == 200, body
    # [T0 - 30 min, T0 + 30 min): the windows at T0, T0 + 1 and T0 + 10 minutes.
    assert (body["windows"], body["drafted_tokens"], body["accepted_tokens"]) == (5, 199, 148)
    assert datetime.fromisoformat(body["until"]) == T0 + timedelta(minutes=30)
    assert datetime.fromisoformat(body["since"]) == T0 - timedelta(minutes=30)


def test_past_the_cap_whole_window_starts_are_summed_and_the_rest_reads_on(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any], session: Session
) -> None:
    _store(app_client, admin_headers, seeded)
    seg = seeded["segment"]["id"]
    start, end = T0 - timedelta(hours=1), T0 + timedelta(hours=1)

    # Three windows fit: the cap falls after the three at T0, so they are read whole.
    first = window_acceptance(session, segment_id=seg, start=start, end=end, max_windows=3)
    assert (first.truncated, first.read_until, first.windows) == (
        True,
        T0 + timedelta(minutes=1),
        3,
    )
    rest = window_acceptance(
        session, segment_id=seg, start=first.read_until, end=end, max_windows=3
    )
    assert (rest.truncated, rest.read_until, rest.windows) == (False, end, 2)
    assert first.drafted_tokens + rest.drafted_tokens == 199
    assert first.accepted_tokens + rest.accepted_tokens == 148
    # A cap inside the windows of one start reads none of them rather than half.
    split = window_acceptance(session, segment_id=seg, start=start, end=end, max_windows=2)
    assert (split.truncated, split.read_until, split.windows, split.drafted_tokens) == (
        True,
        T0,
        0,
        0,
    )


def _error(response: Any) -> tuple[int, str, str | None]:
    error = response.json()["error"]
    return response.status_code, error["code"], error["param"]


def test_bad_input_is_a_typed_422_and_unknown_ids_a_404(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    seg = seeded["segment"]["id"]

    def get(**params: Any) -> Any:
        return app_client.get(URL, params=params, headers=admin_headers)

    assert _error(get(segment_id=seg, arm="draft")) == (422, "invalid_value", "arm")
    assert _error(get()) == (422, "invalid_value", "segment_id")
    same = get(segment_id=seg, since=T0.isoformat(), until=T0.isoformat())
    assert _error(same) == (422, "invalid_value", "since")
    assert "must be before until" in same.json()["error"]["message"]
    long = get(
        segment_id=seg, since=T0.isoformat(), until=(T0 + timedelta(days=31, seconds=1)).isoformat()
    )
    assert _error(long) == (422, "range_too_long", "since")
    assert long.json()["error"]["details"]["max_days"] == 31
    assert (
        get(
            segment_id=seg, since=T0.isoformat(), until=(T0 + timedelta(days=31)).isoformat()
        ).status_code
        == 200
    )
    assert _error(get(segment_id=seg, until="0001-01-01T00:00:00Z")) == (
        422,
        "invalid_value",
        "until",
    )
    assert _error(get(segment_id=seg, since="yesterday")) == (422, "invalid_value", "since")
    baseline = get(segment_id=seg, pool_id=seeded["baseline_pool"]["id"])
    assert _error(baseline) == (422, "baseline_pool", "pool_id")
    missing_segment = get(segment_id=98765)
    assert missing_segment.status_code == 404
    assert missing_segment.json()["error"]["code"] == "segment_not_found"
    missing_pool = get(segment_id=seg, pool_id=98765)
    assert (missing_pool.status_code, missing_pool.json()["error"]["code"]) == (
        404,
        "pool_not_found",
    )
    assert app_client.get(URL, params={"segment_id": seg}).status_code == 401
