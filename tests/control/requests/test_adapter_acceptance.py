"""Acceptance per LoRA adapter from the stored request records: the admin listing and
the control plane's gauges, checked against hand-computed numbers."""

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from control.requests.acceptance import aggregate
from specwire.requests import NOT_ROUTED
from tests.control.observability.scrape import scrape
from tests.control.requests.records import T0, batch, post, record

URL = "/admin/v1/adapters/acceptance"


def test_aggregate_sums_per_adapter_and_pair_and_pads_positions() -> None:
    rows = [
        (None, 7, "tiny-v3", "spec", 10, 30, 21, [9, 7, 5]),
        (None, 7, "tiny-v3", "baseline", 0, 0, 0, []),
        ("rot13", 7, "tiny-v3", "spec", 20, 60, 3, [3]),
        ("rot13", 8, "tiny-v4", "spec", 5, 10, 4, [3, 1]),
    ]
    base, rot_v3, rot_v4 = aggregate(rows)
    assert (base.adapter, base.requests, base.spec_requests) == (None, 2, 1)
    assert base.acceptance_rate == 21 / 30
    assert base.mean_acceptance_length == 1 + 21 / 10
    assert base.per_position_rate == [0.9, 0.7, 0.5]
    assert (rot_v3.adapter, rot_v3.pair_version_id, rot_v3.accepted_per_position) == (
        "rot13",
        7,
        [3],
    )
    assert rot_v3.mean_acceptance_length == 1.15
    assert rot_v4.pair == "tiny-v4" and rot_v4.per_position_rate == [0.6, 0.2]
    assert aggregate([(None, None, None, "baseline", 0, 0, 0, [])])[0].acceptance_rate is None


def test_listing_gives_each_adapter_its_measured_acceptance(
    app_client: TestClient, admin_headers: dict[str, str], internal_headers: dict[str, str]
) -> None:
    records = [
        # The base model on the spec arm: 2 requests, 20 drafts, 42 of 60 accepted.
        record(
            "b-1", drafts=10, drafted_tokens=30, accepted_tokens=21, accepted_per_position=[9, 7, 5]
        ),
        record(
            "b-2", drafts=10, drafted_tokens=30, accepted_tokens=21, accepted_per_position=[9, 7, 5]
        ),
        # The adapter collapses acceptance: 3 of 60 drafted tokens accepted.
        record(
            "a-1",
            model="rot13",
            adapter="rot13",
            drafts=20,
            drafted_tokens=60,
            accepted_tokens=3,
            accepted_per_position=[3, 0, 0],
        ),
        # Another request for it went to baseline (no drafts): counted, not in the ratio.
        record(
            "a-2",
            model="rot13",
            adapter="rot13",
            arm="baseline",
            reason="adapter_mismatch",
            drafts=0,
            drafted_tokens=0,
            accepted_tokens=0,
            accepted_per_position=[],
        ),
        # Refused before routing (no arm): never reached an engine, not counted.
        record(
            "refused",
            model="rot13",
            adapter="rot13",
            arm=None,
            reason=NOT_ROUTED,
            drafts=0,
            drafted_tokens=0,
            accepted_tokens=0,
            accepted_per_position=[],
        ),
        # Outside the window asked for.
        record("old", received_at=(T0 - timedelta(days=1)).isoformat(), adapter="rot13"),
    ]
    assert post(app_client, internal_headers, batch(records)).status_code == 200

    since = (T0 - timedelta(minutes=5)).isoformat()
    resp = app_client.get(URL, params={"since": since}, headers=admin_headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    base, adapter = body["items"]
    assert base["adapter"] is None and base["pair"] == "tiny-v3"
    assert (base["requests"], base["spec_requests"], base["drafts"]) == (2, 2, 20)
    assert base["acceptance_rate"] == 0.7 and base["mean_acceptance_length"] == 3.1
    assert base["per_position_rate"] == [0.9, 0.7, 0.5]
    assert adapter["adapter"] == "rot13"
    assert (adapter["requests"], adapter["spec_requests"], adapter["drafts"]) == (2, 1, 20)
    assert adapter["acceptance_rate"] == 0.05
    assert adapter["mean_acceptance_length"] == 1.15
    assert adapter["per_position_rate"] == [0.15, 0.0, 0.0]

    only = app_client.get(URL, params={"since": since, "adapter": "rot13"}, headers=admin_headers)
    assert [e["adapter"] for e in only.json()["items"]] == ["rot13"]
    # The default window is the last hour: these records are older.
    assert app_client.get(URL, headers=admin_headers).json()["items"] == []
    assert app_client.get(URL).status_code == 401


def test_gauges_export_the_last_hour_per_adapter(
    app_client: TestClient, internal_headers: dict[str, str]
) -> None:
    recent = datetime.now(UTC) - timedelta(minutes=10)
    records = [
        record("n-1", received_at=recent.isoformat()),
        record(
            "n-2",
            received_at=recent.isoformat(),
            model="rot13",
            adapter="rot13",
            drafts=20,
            drafted_tokens=60,
            accepted_tokens=6,
            accepted_per_position=[5, 1, 0],
        ),
        # Two hours ago: outside the exported window.
        record("n-3", received_at=(recent - timedelta(hours=2)).isoformat(), adapter="old"),
    ]
    assert post(app_client, internal_headers, batch(records, start=recent)).status_code == 200
    samples = scrape(app_client)
    base = (("adapter", ""), ("pair", "tiny-v3"))
    rot = (("adapter", "rot13"), ("pair", "tiny-v3"))
    assert samples["specroute_control_adapter_acceptance_rate", base] == 18 / 30
    assert samples["specroute_control_adapter_mean_acceptance_length", base] == 1 + 18 / 10
    assert samples["specroute_control_adapter_acceptance_rate", rot] == 0.1
    assert samples["specroute_control_adapter_mean_acceptance_length", rot] == 1.3
    assert samples["specroute_control_adapter_drafts", rot] == 20
    assert not any(labels == (("adapter", "old"), ("pair", "tiny-v3")) for _, labels in samples)
