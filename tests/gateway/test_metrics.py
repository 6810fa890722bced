"""Prometheus exposition: values after known records, bounded label sets, help text."""

import math

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gateway.metrics import LATENCY_BUCKETS_S, OTHER, GatewayMetrics, TopKLabels
from gateway.telemetry import RequestRecord
from specwire import Arm
from tests.gateway.records import make_record


def rec(**kw: object) -> RequestRecord:
    return make_record(**kw)


def samples(m: GatewayMetrics) -> list[Sample]:
    body, content_type = m.render()
    assert content_type.startswith("text/plain")
    return [s for fam in text_string_to_metric_families(body.decode()) for s in fam.samples]


def value(m: GatewayMetrics, name: str, **labels: str) -> float:
    found = [s.value for s in samples(m) if s.name == name and s.labels == labels]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_request_counters_and_histograms_after_known_records() -> None:
    m = GatewayMetrics(top_k_segments=5)
    m.observe_request(rec())
    m.observe_request(rec())
    m.observe_request(
        rec(
            arm=Arm.BASELINE,
            pair_version_id=None,
            outcome="error",
            http_status=502,
            drafts=0,
            drafted_tokens=0,
            accepted_tokens=0,
            accepted_per_position=(),
            ttft_ms=None,
            tpot_ms=None,
            e2e_ms=3.0,
        )
    )
    spec = {"segment": "code", "arm": "spec", "pair_version": "7"}
    assert value(m, "specroute_gateway_requests_total", **spec, outcome="ok", status="200") == 2
    base = {"segment": "code", "arm": "baseline", "pair_version": "none"}
    assert value(m, "specroute_gateway_requests_total", **base, outcome="error", status="502") == 1
    assert value(m, "specroute_gateway_tokens_total", **spec, kind="prompt") == 20
    assert value(m, "specroute_gateway_tokens_total", **spec, kind="completion") == 40
    sp = {"segment": "code", "pair_version": "7"}
    assert value(m, "specroute_gateway_spec_drafts_total", **sp) == 16
    assert value(m, "specroute_gateway_spec_drafted_tokens_total", **sp) == 48
    assert value(m, "specroute_gateway_spec_accepted_tokens_total", **sp) == 24
    for pos, n in enumerate((6, 4, 2)):
        name = "specroute_gateway_spec_accepted_tokens_by_position_total"
        assert value(m, name, **sp, position=str(pos)) == 2 * n
    lat = {"segment": "code", "arm": "spec"}
    assert value(m, "specroute_gateway_ttft_seconds_count", **lat) == 2
    assert value(m, "specroute_gateway_ttft_seconds_sum", **lat) == 0.1
    # 50 ms lies between the 0.0398107 s and 0.0630957 s edges (cumulative buckets).
    assert LATENCY_BUCKETS_S[13:15] == (0.0398107, 0.0630957)
    assert value(m, "specroute_gateway_ttft_seconds_bucket", **lat, le="0.0398107") == 0
    assert value(m, "specroute_gateway_ttft_seconds_bucket", **lat, le="0.0630957") == 2
    assert value(m, "specroute_gateway_tpot_seconds_sum", **lat) == 0.01
    base_lat = {"segment": "code", "arm": "baseline"}
    assert value(m, "specroute_gateway_e2e_seconds_count", **base_lat) == 1
    ttft_series = [s for s in samples(m) if s.name == "specroute_gateway_ttft_seconds_count"]
    assert [s.labels["arm"] for s in ttft_series] == ["spec"]  # no TTFT for the failed one


def test_decisions_quota_snapshot_outstanding_and_telemetry() -> None:
    m = GatewayMetrics(top_k_segments=5)
    m.observe_decision("cohort_spec", Arm.SPEC)
    m.observe_decision("cohort_spec", Arm.SPEC)
    m.observe_decision("snapshot_stale", Arm.BASELINE)
    m.observe_quota_rejection("acme")
    m.set_snapshot(version=42, age_s=3.0)
    m.set_outstanding("tiny-spec", "w-1", 4)
    m.set_outstanding("tiny-spec", "w-2", 0)
    m.forget_worker("tiny-spec", "w-2")
    m.observe_telemetry_flushed(3)
    m.observe_telemetry_dropped("overflow", 2)
    m.set_telemetry_pending(5)

    assert value(m, "specroute_gateway_decisions_total", reason="cohort_spec", arm="spec") == 2
    assert (
        value(m, "specroute_gateway_decisions_total", reason="snapshot_stale", arm="baseline") == 1
    )
    assert value(m, "specroute_gateway_quota_rejections_total", tenant="acme") == 1
    assert value(m, "specroute_gateway_snapshot_version") == 42
    age = value(m, "specroute_gateway_snapshot_age_seconds")
    assert 3.0 <= age < 4.0  # grows with time since set_snapshot
    outstanding = [s for s in samples(m) if s.name == "specroute_gateway_outstanding_requests"]
    assert [(s.labels["worker"], s.value) for s in outstanding] == [("w-1", 4.0)]
    assert value(m, "specroute_gateway_telemetry_batches_flushed_total") == 3
    assert value(m, "specroute_gateway_telemetry_batches_dropped_total", reason="overflow") == 2
    assert value(m, "specroute_gateway_telemetry_batches_pending") == 5


def test_snapshot_age_is_nan_before_the_first_snapshot() -> None:
    assert math.isnan(
        value(GatewayMetrics(top_k_segments=1), "specroute_gateway_snapshot_age_seconds")
    )


def test_segment_and_tenant_labels_stay_within_top_k_plus_other() -> None:
    k = 4
    m = GatewayMetrics(top_k_segments=k)
    for i in range(300):
        # A few heavy segments among many light ones, heavy ones arriving late.
        name = f"heavy-{i % 3}" if i >= 150 else f"seg-{i}"
        m.observe_request(rec(segment_name=name, segment_id=i))
        m.observe_quota_rejection(f"tenant-{i}")
    by_metric: dict[str, set[str]] = {}
    for s in samples(m):
        for label in ("segment", "tenant"):
            if label in s.labels:
                by_metric.setdefault(s.name, set()).add(s.labels[label])
    assert by_metric  # the loop below must check something
    for name, values in by_metric.items():
        assert len(values) <= k + 1, (name, values)
    requests = {
        s.labels["segment"]: s.value
        for s in samples(m)
        if s.name == "specroute_gateway_requests_total"
    }
    assert {"heavy-0", "heavy-1", "heavy-2"} <= set(requests)  # top traffic got its own label
    assert OTHER in requests
    tenants = {
        s.labels["tenant"]
        for s in samples(m)
        if s.name == "specroute_gateway_quota_rejections_total"
    }
    assert len(tenants) == k + 1 and OTHER in tenants


def test_top_k_admits_heavy_values_with_hysteresis() -> None:
    evicted: list[str] = []
    top = TopKLabels(2, on_evict=evicted.append, hysteresis=2.0)
    assert [top.resolve(v) for v in ("a", "b", "c")] == ["a", "b", OTHER]
    assert top.resolve("c") == OTHER  # 2 vs 1: not yet more than twice the weakest
    assert top.resolve("c") == "c"  # 3 > 2 * 1: displaces one of the singletons
    assert len(evicted) == 1 and evicted[0] in ("a", "b")
    assert top.admitted == {"c", ({"a", "b"} - set(evicted)).pop()}


def test_every_metric_is_prefixed_and_documented() -> None:
    body, _ = GatewayMetrics(top_k_segments=2).render()
    families = list(text_string_to_metric_families(body.decode()))
    assert len(families) >= 17
    for fam in families:
        assert fam.name.startswith("specroute_gateway_"), fam.name
        assert "Unit:" in fam.documentation, fam.name


def test_full_proposals_count_the_drafts_accepted_whole() -> None:
    m = GatewayMetrics(top_k_segments=4)
    # 8 drafts of k=3: 6 accepted position 0, 4 position 1, 2 all three.
    m.observe_request(rec(segment_name="code", accepted_per_position=(6, 4, 2), drafts=8))
    m.observe_request(
        rec(segment_name="code", accepted_per_position=(5, 1, 0), accepted_tokens=6, drafts=8)
    )
    full = [s for s in samples(m) if s.name == "specroute_gateway_spec_full_proposals_total"]
    assert [(s.labels["segment"], s.value) for s in full] == [("code", 2.0)]
    drafts = [s for s in samples(m) if s.name == "specroute_gateway_spec_drafts_total"]
    assert [s.value for s in drafts] == [16.0]  # full-proposal acceptance 2/16
    # Judged positions, the guard's denominator: drafts + accepted - accepted at the last
    # position, per request: (8 + 12 - 2) + (8 + 6 - 0).
    judged = [s for s in samples(m) if s.name == "specroute_gateway_spec_judged_positions_total"]
    assert [s.value for s in judged] == [18.0 + 14.0]


def test_each_label_set_counts_in_its_own_series_interleaved() -> None:
    m = GatewayMetrics(top_k_segments=5)
    base: dict[str, object] = {"arm": Arm.BASELINE, "pair_version_id": None, "drafts": 0}
    base |= {"drafted_tokens": 0, "accepted_tokens": 0, "accepted_per_position": ()}
    for r in (
        rec(),
        rec(**base),
        rec(segment_name="prose", outcome="error", http_status=502, prompt_tokens=3),
        rec(),
        rec(**base, completion_tokens=7),
        rec(segment_name="prose", pair_version_id=8),
    ):
        m.observe_request(r)
    requests = {
        tuple(s.labels[k] for k in ("segment", "arm", "pair_version", "status")): s.value
        for s in samples(m)
        if s.name == "specroute_gateway_requests_total"
    }
    assert requests == {
        ("code", "spec", "7", "200"): 2,
        ("code", "baseline", "none", "200"): 2,
        ("prose", "spec", "7", "502"): 1,
        ("prose", "spec", "8", "200"): 1,
    }
    spec = {"segment": "code", "arm": "spec", "pair_version": "7"}
    base_labels = {"segment": "code", "arm": "baseline", "pair_version": "none"}
    assert value(m, "specroute_gateway_tokens_total", **base_labels, kind="completion") == 27
    assert value(m, "specroute_gateway_tokens_total", **spec, kind="completion") == 40
    prose7 = {"segment": "prose", "arm": "spec", "pair_version": "7"}
    assert value(m, "specroute_gateway_tokens_total", **prose7, kind="prompt") == 3
    drafts = {
        (s.labels["segment"], s.labels["pair_version"]): s.value
        for s in samples(m)
        if s.name == "specroute_gateway_spec_drafts_total"
    }
    assert drafts == {("code", "7"): 16, ("prose", "7"): 8, ("prose", "8"): 8}
    e2e = {
        (s.labels["segment"], s.labels["arm"]): s.value
        for s in samples(m)
        if s.name == "specroute_gateway_e2e_seconds_count"
    }
    assert e2e == {("code", "spec"): 2, ("code", "baseline"): 2, ("prose", "spec"): 2}


def test_a_zero_count_still_has_its_series_and_an_unobserved_one_none() -> None:
    m = GatewayMetrics(top_k_segments=5)
    m.observe_request(
        rec(
            prompt_tokens=0,
            drafts=0,
            drafted_tokens=5,
            accepted_tokens=0,
            accepted_per_position=(0, 0),
            ttft_ms=None,
        )
    )
    sp = {"segment": "code", "pair_version": "7"}
    assert value(m, "specroute_gateway_spec_drafts_total", **sp) == 0
    assert value(m, "specroute_gateway_spec_drafted_tokens_total", **sp) == 5
    assert value(m, "specroute_gateway_spec_accepted_tokens_total", **sp) == 0
    assert value(m, "specroute_gateway_spec_full_proposals_total", **sp) == 0
    name = "specroute_gateway_spec_accepted_tokens_by_position_total"
    positions = {s.labels["position"]: s.value for s in samples(m) if s.name == name}
    assert positions == {"0": 0, "1": 0}
    unknown = {**sp, "position_bucket": "unknown"}
    drafted = "specroute_gateway_spec_drafted_tokens_by_response_position_total"
    accepted = "specroute_gateway_spec_accepted_tokens_by_response_position_total"
    assert value(m, drafted, **unknown) == 5
    assert value(m, accepted, **unknown) == 0
    kinds = [s.labels["kind"] for s in samples(m) if s.name == "specroute_gateway_tokens_total"]
    assert kinds == ["completion"]  # no prompt tokens: no prompt series
    names = {s.name for s in samples(m)}
    assert "specroute_gateway_ttft_seconds_count" not in names
    assert "specroute_gateway_spec_judged_positions_total" not in names  # no drafts judged


def test_a_segment_evicted_and_admitted_again_counts_in_a_live_series() -> None:
    m = GatewayMetrics(top_k_segments=1)  # hysteresis 2
    # a admitted; b's third request displaces it (3 > 2 * 1); a's seventh displaces b.
    for name in ["a"] + ["b"] * 3 + ["a"] * 6:
        m.observe_request(rec(segment_name=name))
    requests = {
        s.labels["segment"]: s.value
        for s in samples(m)
        if s.name == "specroute_gateway_requests_total"
    }
    assert requests == {"a": 1, OTHER: 2 + 5}
    assert value(m, "specroute_gateway_e2e_seconds_count", segment="a", arm="spec") == 1
    sp = {"segment": "a", "pair_version": "7"}
    assert value(m, "specroute_gateway_spec_drafts_total", **sp) == 8
