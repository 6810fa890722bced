"""Error-rate blocks against direct computations, and the spec pool's load projection."""

import math
from dataclasses import replace

import pytest

from control.stats import SpecFlow, error_blocks
from control.stats.matched import PROJECTION_CEILING
from control.stats.panel import empty_panel


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
