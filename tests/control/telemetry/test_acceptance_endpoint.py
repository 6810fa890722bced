"""GET /admin/v1/telemetry/acceptance over windows stored through the ingestion API:
exact sums, each filter, the window cap, and the typed errors."""

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from control.clock import use_clock
from control.telemetry.acceptance import window_acceptance
from specwire import Arm
from specwire.admin_client import AdminClient, AsyncAdminClient, InvalidRequest, NotFound
from tests.control.conftest import created, sdk_http
from tests.control.telemetry.windows import post_windows, window
from tests.fixtures.db import ADMIN_TOKEN, INTERNAL_TOKEN

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


def _second_version(client: TestClient, headers: dict[str, str], seeded: dict[str, Any]) -> int:
    """Another registered version of the seeded pair, which no pool serves."""
    pair = seeded["pair"]["id"]
    fields = {k: seeded["version"][k] for k in ("method", "target_ref", "draft_ref")}
    version = created(
        client.post(
            f"/admin/v1/pairs/{pair}/versions",
            json={**fields, "num_speculative_tokens": 5},
            headers=headers,
        )
    )
    return int(version["id"])


def _store_more(client: TestClient, seeded: dict[str, Any], second_version: int) -> None:
    """Beside `_store`'s: the second version's window in the segment, and windows of
    requests that matched no segment (both versions, no version, both arms), from
    gateways and starts `_store` did not post (a repeated batch is a no-op)."""
    seg, pv = seeded["segment"]["id"], seeded["version"]["id"]
    post_windows(
        client,
        INTERNAL_TOKEN,
        [
            (
                "gw-a",
                window(
                    seg,
                    Arm.SPEC,
                    T0 + timedelta(minutes=2),
                    requests=6,
                    drafts=7,
                    per_position=[7, 3],
                    buckets={"16-63": (35, 10)},
                    pair_version_id=second_version,
                ),
            ),
            (
                "gw-c",
                window(
                    None,
                    Arm.SPEC,
                    T0,
                    requests=11,
                    drafts=12,
                    per_position=[10, 8, 6],
                    buckets={"0-15": (30, 20), "64-255": (6, 4)},
                    pair_version_id=pv,
                ),
            ),
            ("gw-c", window(None, Arm.BASELINE, T0, requests=13, pair_version_id=pv)),
            (
                "gw-b",
                window(
                    None,
                    Arm.SPEC,
                    T0 + timedelta(minutes=3),
                    requests=4,
                    drafts=5,
                    per_position=[2, 1],
                    buckets={"256+": (15, 3)},
                    pair_version_id=second_version,
                ),
            ),
            # No rollout and no pair version: a request no segment matched, served plain.
            ("gw-b", window(None, Arm.BASELINE, T0 + timedelta(minutes=3), requests=17)),
            # Two hours before: outside the range asked.
            (
                "gw-c",
                window(
                    None,
                    Arm.SPEC,
                    T0 - timedelta(hours=2),
                    requests=1,
                    drafts=1,
                    per_position=[1],
                    buckets={"0-15": (3, 1)},
                    pair_version_id=pv,
                ),
            ),
        ],
    )


SUMS = ("windows", "requests", "drafts", "drafted_tokens", "accepted_tokens")


def _sums(body: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(body[k] for k in (*SUMS, "accepted_per_position"))


def test_pair_version_id_selects_its_windows_and_must_agree_with_the_pool(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    _store(app_client, admin_headers, seeded)
    second = _second_version(app_client, admin_headers, seeded)
    _store_more(app_client, seeded, second)
    seg, pv, pool = seeded["segment"]["id"], seeded["version"]["id"], seeded["spec_pool"]["id"]

    status, first = _get(
        app_client, admin_headers, segment_id=seg, pair_version_id=pv, **HOUR_AROUND_T0
    )
    assert status == 200, first
    # Both arms of the version's windows (the baseline one carries it as the rollout's
    # compared version); not the other versions', not the unsegmented ones.
    assert _sums(first) == (4, 10 + 8 + 5 + 2, 20 + 10 + 3, 99, 48, [24, 16, 8])
    assert (first["segment_id"], first["pool_id"], first["pair_version_id"]) == (seg, None, pv)
    assert _buckets(first)["unknown"] == (30, 12, 0.4)
    # The spec pool selects the same windows, and naming both agrees.
    status, by_pool = _get(
        app_client, admin_headers, segment_id=seg, pool_id=pool, **HOUR_AROUND_T0
    )
    assert (status, _sums(by_pool), by_pool["pair_version_id"]) == (200, _sums(first), pv)
    status, both = _get(
        app_client,
        admin_headers,
        segment_id=seg,
        pool_id=pool,
        pair_version_id=pv,
        arm="spec",
        **HOUR_AROUND_T0,
    )
    assert status == 200, both
    assert _sums(both) == (3, 17, 33, 99, 48, [24, 16, 8])
    assert (both["pool_id"], both["pair_version_id"], both["arm"]) == (pool, pv, "spec")

    status, other = _get(
        app_client, admin_headers, segment_id=seg, pair_version_id=second, **HOUR_AROUND_T0
    )
    assert status == 200, other
    assert _sums(other) == (1, 6, 7, 35, 10, [7, 3])
    assert _buckets(other)["16-63"] == (35, 10, 10 / 35)

    mismatch = app_client.get(
        URL,
        params={"segment_id": seg, "pool_id": pool, "pair_version_id": second},
        headers=admin_headers,
    )
    assert _error(mismatch) == (422, "pair_version_mismatch", "pair_version_id")
    error = mismatch.json()["error"]
    assert error["details"] == {
        "param": "pair_version_id",
        "params": ["pool_id", "pair_version_id"],
        "pool_pair_version_id": pv,
    }
    assert (
        f"pool_id {pool} serves pair version {pv}, not pair_version_id {second}"
        in (error["message"])
    )


def test_unsegmented_reads_the_windows_no_segment_matched(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    _store(app_client, admin_headers, seeded)
    second = _second_version(app_client, admin_headers, seeded)
    _store_more(app_client, seeded, second)
    pv = seeded["version"]["id"]

    status, body = _get(app_client, admin_headers, unsegmented="true", **HOUR_AROUND_T0)
    assert status == 200, body
    # Every unsegmented window in the range, whatever its version: none of a segment's.
    assert _sums(body) == (4, 11 + 13 + 4 + 17, 12 + 5, 51, 27, [12, 9, 6])
    assert body["acceptance_rate"] == 27 / 51
    assert _buckets(body) == {
        "0-15": (30, 20, 20 / 30),
        "16-63": (0, 0, None),
        "64-255": (6, 4, 4 / 6),
        "256+": (15, 3, 0.2),
        "unknown": (0, 0, None),
    }
    assert (body["segment_id"], body["pool_id"], body["pair_version_id"], body["arm"]) == (
        None,
        None,
        None,
        None,
    )

    status, spec = _get(
        app_client,
        admin_headers,
        unsegmented="true",
        pool_id=seeded["spec_pool"]["id"],
        arm="spec",
        **HOUR_AROUND_T0,
    )
    assert (status, _sums(spec)) == (200, (1, 11, 12, 36, 24, [10, 8, 6]))
    status, version = _get(
        app_client, admin_headers, unsegmented="true", pair_version_id=pv, **HOUR_AROUND_T0
    )
    assert (status, _sums(version)) == (200, (2, 24, 12, 36, 24, [10, 8, 6]))
    status, baseline = _get(
        app_client, admin_headers, unsegmented="true", arm="baseline", **HOUR_AROUND_T0
    )
    assert (status, _sums(baseline)) == (200, (2, 30, 0, 0, 0, []))
    status, second_body = _get(
        app_client, admin_headers, unsegmented=True, pair_version_id=second, **HOUR_AROUND_T0
    )
    assert (status, _sums(second_body)) == (200, (1, 4, 5, 15, 3, [2, 1]))
    # unsegmented=false is the segment's read, as if not given.
    status, seg = _get(
        app_client,
        admin_headers,
        segment_id=seeded["segment"]["id"],
        unsegmented="false",
        **HOUR_AROUND_T0,
    )
    assert (status, seg["windows"], seg["drafted_tokens"]) == (200, 6, 199 + 35)


def test_pair_version_and_unsegmented_errors_are_typed(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    seg, pool = seeded["segment"]["id"], seeded["spec_pool"]["id"]

    def get(**params: Any) -> Any:
        return app_client.get(URL, params=params, headers=admin_headers)

    both = get(segment_id=seg, unsegmented="true")
    assert _error(both) == (422, "conflicting_params", "unsegmented")
    assert both.json()["error"]["details"]["params"] == ["segment_id", "unsegmented"]
    neither = get(unsegmented="false")
    assert _error(neither) == (422, "invalid_value", "segment_id")
    assert "unsegmented=true" in neither.json()["error"]["message"]
    assert _error(get(unsegmented="maybe")) == (422, "invalid_value", "unsegmented")
    assert _error(get(segment_id=seg, pair_version_id=0)) == (
        422,
        "invalid_value",
        "pair_version_id",
    )
    # An unregistered pair version is a 404, even one some stored window names.
    for missing in (98765, OTHER_PAIR_VERSION):
        response = get(segment_id=seg, pair_version_id=missing)
        assert (response.status_code, response.json()["error"]["code"]) == (
            404,
            "pair_version_not_found",
        )
        assert response.json()["error"]["type"] == "not_found_error"
    # With a pool, the pool's own refusals come first.
    baseline = get(unsegmented="true", pool_id=seeded["baseline_pool"]["id"], pair_version_id=1)
    assert _error(baseline) == (422, "baseline_pool", "pool_id")
    missing_pool = get(segment_id=seg, pool_id=98765, pair_version_id=seeded["version"]["id"])
    assert (missing_pool.status_code, missing_pool.json()["error"]["code"]) == (
        404,
        "pool_not_found",
    )
    assert (
        get(segment_id=seg, pool_id=pool, pair_version_id=seeded["version"]["id"]).status_code
        == 200
    )


def _sdk_bodies(
    client: TestClient, headers: dict[str, str], seeded: dict[str, Any], second: int
) -> dict[str, Any]:
    """The API's own answers for the reads the SDK tests repeat."""
    pv = seeded["version"]["id"]
    return {
        "version": _get(
            client, headers, segment_id=seeded["segment"]["id"], pair_version_id=pv,
            **HOUR_AROUND_T0,
        )[1],
        "unsegmented": _get(client, headers, unsegmented="true", **HOUR_AROUND_T0)[1],
        "second": _get(
            client, headers, unsegmented="true", pair_version_id=second, **HOUR_AROUND_T0
        )[1],
    }  # fmt: skip


def test_the_sdk_passes_pair_version_and_unsegmented(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    _store(app_client, admin_headers, seeded)
    second = _second_version(app_client, admin_headers, seeded)
    _store_more(app_client, seeded, second)
    want = _sdk_bodies(app_client, admin_headers, seeded, second)
    http = TestClient(
        app_client.app,
        base_url="http://testserver/admin/v1",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    admin = AdminClient("http://testserver", http=sdk_http(http))
    pv = seeded["version"]["id"]

    version = admin.telemetry_acceptance("code", pair_version=pv, **HOUR_AROUND_T0)
    assert (version, _sums(version)) == (want["version"], (4, 25, 33, 99, 48, [24, 16, 8]))
    unsegmented = admin.telemetry_acceptance(unsegmented=True, **HOUR_AROUND_T0)
    assert (unsegmented, unsegmented["segment_id"]) == (want["unsegmented"], None)
    assert _sums(unsegmented) == (4, 45, 17, 51, 27, [12, 9, 6])
    assert (
        admin.telemetry_acceptance(None, unsegmented=True, pair_version=second, **HOUR_AROUND_T0)
        == want["second"]
    )
    with pytest.raises(InvalidRequest) as mismatch:
        admin.telemetry_acceptance("code", pool="tiny-spec", pair_version=second)
    assert (mismatch.value.status, mismatch.value.code) == (422, "pair_version_mismatch")
    assert mismatch.value.details["params"] == ["pool_id", "pair_version_id"]
    with pytest.raises(InvalidRequest) as both:
        admin.telemetry_acceptance("code", unsegmented=True)
    assert both.value.code == "conflicting_params"
    with pytest.raises(InvalidRequest) as neither:
        admin.telemetry_acceptance()
    assert (neither.value.code, neither.value.details["param"]) == ("invalid_value", "segment_id")
    with pytest.raises(NotFound) as missing:
        admin.telemetry_acceptance(unsegmented=True, pair_version=98765)
    assert missing.value.code == "pair_version_not_found"


async def test_the_async_sdk_passes_them_the_same_way(
    app_client: TestClient, admin_headers: dict[str, str], seeded: dict[str, Any]
) -> None:
    _store(app_client, admin_headers, seeded)
    second = _second_version(app_client, admin_headers, seeded)
    _store_more(app_client, seeded, second)
    want = _sdk_bodies(app_client, admin_headers, seeded, second)
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app_client.app),
        base_url="http://testserver/admin/v1",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    pv = seeded["version"]["id"]
    async with AsyncAdminClient("http://testserver", http=http) as admin:
        version = await admin.telemetry_acceptance(
            seeded["segment"]["id"], pair_version=pv, **HOUR_AROUND_T0
        )
        assert version == want["version"]
        unsegmented = await admin.telemetry_acceptance(unsegmented=True, **HOUR_AROUND_T0)
        assert (unsegmented, _sums(unsegmented)) == (
            want["unsegmented"],
            (4, 45, 17, 51, 27, [12, 9, 6]),
        )
        assert (
            await admin.telemetry_acceptance(
                unsegmented=True, pair_version=second, **HOUR_AROUND_T0
            )
            == want["second"]
        )
        with pytest.raises(InvalidRequest) as mismatch:
            await admin.telemetry_acceptance(
                "code", pool=seeded["spec_pool"]["id"], pair_version=second
            )
        assert mismatch.value.code == "pair_version_mismatch"
        with pytest.raises(InvalidRequest) as both:
            await admin.telemetry_acceptance("code", unsegmented=True)
        assert both.value.code == "conflicting_params"
        with pytest.raises(NotFound) as missing:
            await admin.telemetry_acceptance("code", pair_version=98765)
        assert missing.value.code == "pair_version_not_found"
