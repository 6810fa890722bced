"""Acceptance by response position: per-step arrays from vLLM's `detailed` per-request
metrics, bucketed by where each verify step began, counted in the gateway's /metrics."""

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gateway.metrics import GatewayMetrics
from gateway.proxy.sanitize import spec_stats
from gateway.telemetry.positions import by_response_position, position_bucket
from gateway.telemetry.record import RequestRecord
from specwire import Arm

# The final usage chunk of a streamed request to the tiny pair's spec server (vLLM 0.32,
# k=3, --per-request-spec-decode-metrics detailed, max_tokens 20).
REAL_DETAILED = {
    "usage": {"prompt_tokens": 9, "total_tokens": 29, "completion_tokens": 20},
    "metrics": {
        "speculative_decoding": {
            "mean_acceptance_length": 2.2222222222222223,
            "draft_acceptance_rate": 0.4074074074074074,
            "acceptance_histogram": [3, 2, 3, 1],
            "num_spec_steps": 9,
            "num_accepted_draft_tokens": 11,
            "num_draft_tokens": 27,
            "num_spec_tokens": 3,
            "per_step_accepted": [1, 0, 0, 2, 2, 1, 0, 3, 2],
            "per_step_drafted": [3, 3, 3, 3, 3, 3, 3, 3, 3],
        }
    },
}


def test_bucket_edges() -> None:
    assert [position_bucket(p) for p in (0, 15, 16, 63, 64, 255, 256, 10_000)] == [
        0, 0, 1, 1, 2, 2, 3, 3,
    ]  # fmt: skip


def test_steps_count_where_they_began() -> None:
    # Steps begin at 1, 3, 4, 5, 8, 11, 13, 14, 18: eight in 0-15, the last in 16-63.
    stats = spec_stats(REAL_DETAILED)
    assert stats is not None
    assert stats.by_response_position == ((24, 9), (3, 2), (0, 0), (0, 0))
    assert sum(d for d, _ in stats.by_response_position) == stats.drafted_tokens == 27
    assert sum(a for _, a in stats.by_response_position) == stats.accepted_tokens == 11
    # 80 steps accepting all 3 of 3: each emits 4 tokens, so step s begins at 1 + 4 s.
    long = by_response_position([3] * 80, [3] * 80)
    assert long == ((12, 12), (36, 36), (144, 144), (48, 48))


def test_a_summary_engine_has_no_positions_and_bad_arrays_are_no_stats() -> None:
    summary = {
        "metrics": {"speculative_decoding": {"acceptance_histogram": [0, 1], "num_draft_tokens": 1}}
    }
    stats = spec_stats(summary)
    assert stats is not None and stats.by_response_position is None
    with pytest.raises(ValueError, match="differ in length"):
        by_response_position([1], [3, 3])
    bad = {"metrics": {"speculative_decoding": {"per_step_accepted": [4], "per_step_drafted": [3]}}}
    assert spec_stats(bad) is None


def _record(by_position: tuple[tuple[int, int], ...] | None) -> RequestRecord:
    return RequestRecord(
        request_id="r",
        tenant="t",
        segment_id=1,
        segment_name="code",
        arm=Arm.SPEC,
        pair_version_id=7,
        rollout_id=None,
        reason="rollout",
        outcome="ok",
        http_status=200,
        prompt_tokens=9,
        completion_tokens=20,
        drafts=9,
        drafted_tokens=27,
        accepted_tokens=11,
        accepted_per_position=(6, 4, 1),
        ttft_ms=None,
        tpot_ms=None,
        e2e_ms=100.0,
        finished_at=0.0,
        by_response_position=by_position,
    )


def test_gateway_metrics_count_drafted_and_accepted_by_position_bucket() -> None:
    metrics = GatewayMetrics(top_k_segments=4)
    stats = spec_stats(REAL_DETAILED)
    assert stats is not None
    metrics.observe_request(_record(stats.by_response_position))
    metrics.observe_request(_record(None))  # an engine without per-step arrays
    samples = {
        (s.name, s.labels["position_bucket"]): s.value
        for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
        for s in family.samples
        if "by_response_position_total" in s.name and s.labels["segment"] == "code"
    }
    drafted = "specroute_gateway_spec_drafted_tokens_by_response_position_total"
    accepted = "specroute_gateway_spec_accepted_tokens_by_response_position_total"
    assert samples == {
        (drafted, "0-15"): 24.0,
        (drafted, "16-63"): 3.0,
        (drafted, "64-255"): 0.0,
        (drafted, "256+"): 0.0,
        (drafted, "unknown"): 27.0,
        (accepted, "0-15"): 9.0,
        (accepted, "16-63"): 2.0,
        (accepted, "64-255"): 0.0,
        (accepted, "256+"): 0.0,
        (accepted, "unknown"): 11.0,
    }
