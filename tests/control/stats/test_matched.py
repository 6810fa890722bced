"""Load-matched latency and error blocks against direct computations on raw samples."""

import itertools
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from control.contract import Arm
from control.simulation.traffic import ArmModel, TrafficModel, sample_arm
from control.simulation.windows import window_of
from control.stats import (
    SpecFlow,
    build_panel,
    error_blocks,
    latency_blocks,
    matched_difference,
    matched_quantile_ratio,
    pooled_log_variance,
)
from control.stats.matched import PROJECTION_CEILING
from control.stats.panel import N_STRATA, ArmPanel, empty_panel, window_arrays
from tests.control.stats.simulate import window_row

E2E_PER_TOKEN = 0
START = datetime(2030, 1, 1, tzinfo=UTC)
TRAFFIC = TrafficModel(min_tokens=64, max_tokens=64, tpot_sigma=0.2, ttft_sigma=0.01)


def _moments(samples: dict[int, np.ndarray]) -> np.ndarray:
    """[N_STRATA, 3] log moments of raw latency samples per load bucket."""
    m = np.zeros((N_STRATA, 3))
    for bucket, values in samples.items():
        logs = np.log(values)
        m[bucket] = (len(values), logs.sum(), (logs**2).sum())
    return m


def test_pooled_variance_is_the_within_bucket_variance() -> None:
    rng = np.random.default_rng(1)
    a = rng.lognormal(1.0, 0.3, 400)
    b = rng.lognormal(2.0, 0.3, 600)  # another load bucket, another mean
    pooled = pooled_log_variance(_moments({0: a, 3: b}))
    within = (
        np.sum((np.log(a) - np.log(a).mean()) ** 2) + np.sum((np.log(b) - np.log(b).mean()) ** 2)
    ) / (1000 - 2)
    assert pooled == pytest.approx(within)
    assert pooled_log_variance(_moments({0: a[:1]})) is None


def test_matched_difference_combines_buckets_by_inverse_variance() -> None:
    spec = _moments({0: np.full(10, 8.0), 2: np.full(40, 12.0), 5: np.full(3, 30.0)})
    base = _moments({0: np.full(30, 10.0), 2: np.full(10, 15.0)})
    diff = matched_difference(spec, base, spec_variance=0.04, baseline_variance=0.09)
    assert diff is not None
    v0, v2 = 0.04 / 10 + 0.09 / 30, 0.04 / 40 + 0.09 / 10
    d0, d2 = math.log(8 / 10), math.log(12 / 15)
    assert diff.estimate == pytest.approx((d0 / v0 + d2 / v2) / (1 / v0 + 1 / v2))
    assert diff.variance == pytest.approx(1 / (1 / v0 + 1 / v2))
    # Bucket 5 has no baseline requests: it takes no part.
    assert (diff.spec_requests, diff.baseline_requests) == (50, 40)
    only_high = matched_difference(spec, base, 0.04, 0.09, min_bucket=1)
    assert only_high is not None and only_high.estimate == pytest.approx(d2)
    assert matched_difference(spec, base, 0.04, 0.09, min_bucket=3) is None


def _panel(model: ArmModel, arm: Arm, loads: list[float], n: int, seed: int) -> ArmPanel:
    rng = np.random.default_rng(seed)
    starts = [START + timedelta(seconds=10 * t) for t in range(len(loads))]
    rows = [
        window_row(
            window_of(
                sample_arm(rng, model, TRAFFIC, n, load),
                arm=arm,
                segment_id=1,
                pair_version_id=1,
                rollout_id=1,
                window_start=start,
                window_seconds=10,
            )
        )
        for start, load in zip(starts, loads, strict=True)
    ]
    slots = {start: t for t, start in enumerate(starts)}
    return build_panel(slots, len(loads), map(window_arrays, rows))


def test_matched_comparison_removes_the_load_bias_a_raw_comparison_has() -> None:
    # Same engine speed on both arms, but the baseline runs at load ~4, the spec arm at
    # ~0.2: each request in flight costs 10 %. The raw log ratio says speculation wins
    # by ~40 %; matched by load it is even, as it should be.
    model = ArmModel(tpot_ms=10.0, load_slope=0.1, ttft_ms=50.0, acceptance=0.7)
    spec = _panel(model, Arm.SPEC, [0.2] * 20, 100, seed=1)
    base = _panel(model, Arm.BASELINE, [4.0] * 20, 1000, seed=2)
    m = E2E_PER_TOKEN
    raw = spec.moments[:, :, m].sum(axis=(0, 1))
    raw_base = base.moments[:, :, m].sum(axis=(0, 1))
    assert raw[1] / raw[0] - raw_base[1] / raw_base[0] < -0.25
    var_s = pooled_log_variance(spec.moments[:, :, m])
    var_b = pooled_log_variance(base.moments[:, :, m])
    assert var_s is not None and var_b is not None
    blocks = latency_blocks(
        spec, base, m, min_requests=10, spec_variance=var_s, baseline_variance=var_b
    )
    assert len(blocks) >= 15
    estimate = sum(b.estimate / b.variance for b in blocks) / sum(1 / b.variance for b in blocks)
    assert abs(estimate) < 0.03
    # Every block holds at least 10 matched requests per arm, in order, without overlap.
    assert all(a.last_slot < b.first_slot for a, b in itertools.pairwise(blocks))


def test_matched_comparison_finds_a_real_slowdown_at_equal_load() -> None:
    slow = ArmModel(tpot_ms=12.5, load_slope=0.0, ttft_ms=50.0, acceptance=0.7)
    fast = ArmModel(tpot_ms=10.0, load_slope=0.0, ttft_ms=50.0)
    spec = _panel(slow, Arm.SPEC, [1.0] * 10, 200, seed=3)
    base = _panel(fast, Arm.BASELINE, [1.0] * 10, 200, seed=4)
    blocks = latency_blocks(
        spec, base, E2E_PER_TOKEN, min_requests=50, spec_variance=1.0, baseline_variance=1.0
    )
    assert len(blocks) == 10
    for block in blocks:
        # (50 + 63 x 12.5) / (50 + 63 x 10): 24 % slower; the block's own variance is
        # the one used, not the (much larger) fallback passed in.
        assert block.estimate == pytest.approx(math.log(837.5 / 680), abs=0.08)
        assert block.variance < 0.01


def test_error_blocks_difference_and_pooled_variance() -> None:
    spec, base = empty_panel(3), empty_panel(3)
    spec.requests[:] = [20, 20, 20]
    spec.errors[:] = [4, 2, 0]
    base.requests[:] = [100, 100, 100]
    base.errors[:] = [1, 1, 1]
    blocks = error_blocks(spec, base, min_requests=30)
    # Slots 0-1 make the first block (40 spec requests); slot 2 is pending.
    assert [(b.first_slot, b.last_slot) for b in blocks] == [(0, 1)]
    assert blocks[0].estimate == pytest.approx(6 / 40 - 2 / 200)
    spec_rate, base_rate = 7 / 62, 4 / 302
    expected = spec_rate * (1 - spec_rate) / 40 + base_rate * (1 - base_rate) / 200
    assert blocks[0].variance == pytest.approx(expected)


def test_matched_quantile_reweights_the_baseline_to_the_spec_load_mix() -> None:
    counts_s = np.zeros((N_STRATA, 62), np.int32)
    counts_b = np.zeros((N_STRATA, 62), np.int32)
    counts_s[0, 30], counts_s[4, 40] = 90, 10  # spec: mostly idle
    counts_b[0, 30], counts_b[4, 40] = 10, 90  # baseline: mostly busy, same per bucket
    spec_q, base_q = matched_quantile_ratio(counts_s, counts_b, 0.5) or (0.0, 0.0)
    # Same latency per bucket: matched medians agree although the raw ones differ a lot.
    assert spec_q == pytest.approx(base_q)
    assert matched_quantile_ratio(counts_s, np.zeros_like(counts_b), 0.5) is None


def test_projection_adds_the_next_stage_share_through_littles_law() -> None:
    load = SpecFlow(
        load_now=0.5,
        share_now=5.0,
        segment_rate_per_s=100.0,
        spec_latency_s=0.8,
        spec_workers=4,
    ).load_at(25.0)
    # 20 % of 100 req/s more, each in flight 0.8 s, over 4 workers: +4 per worker.
    assert load == pytest.approx(4.5)


def test_projection_follows_the_spec_arms_own_latency_growth() -> None:
    flow = SpecFlow(
        load_now=0.5,
        share_now=50.0,
        segment_rate_per_s=200.0,
        spec_latency_s=0.1,
        spec_workers=8,
        log_slope=0.2,
    )
    load = flow.load_at(90.0)
    # The fixed point: in flight at 90 % with the latency the line gives at that load.
    latency = 0.1 * math.exp(0.2 * (load - 0.5))
    assert load == pytest.approx(0.5 + (180.0 * latency - 100.0 * 0.1) / 8, abs=1e-5)
    flat = SpecFlow(
        load_now=0.5, share_now=50.0, segment_rate_per_s=200.0, spec_latency_s=0.1, spec_workers=8
    )
    assert flat.load_at(90.0) == pytest.approx(1.5)  # 80 req/s more x 0.1 s / 8
    assert load > flat.load_at(90.0) + 0.1
    # A latency that falls with load is read as flat, never as a smaller load.
    assert replace(flow, log_slope=-0.5).load_at(90.0) == pytest.approx(1.5)
    # The inverse: the share that brings that load.
    assert flow.share_for(load) == pytest.approx(90.0, abs=1e-3)
    assert flow.share_for(0.5) == pytest.approx(50.0)
    # A smaller share keeps today's load; a queue that never settles hits the ceiling.
    assert flow.load_at(25.0) == 0.5
    assert replace(flow, log_slope=3.0).load_at(90.0) == PROJECTION_CEILING
    assert replace(flow, segment_rate_per_s=0.0).share_for(1.0) is None
