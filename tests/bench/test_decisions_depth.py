"""The decision suite's depth-by-load scenario: a k = 5 / 3 / 2 ladder under load that
crosses both break-even points and back, then oscillates around one, every request
through the gateway's decide, DepthRouter and balancer on a virtual clock.

The ladder follows the load (one switch per real crossing of a bound's band, the
depth best at the load for nearly every request outside the bands) and never flaps
(no switch inside the dwell, none while the load oscillates across the break-even
point inside the band, no acceptance reset on constant acceptance)."""

from dataclasses import replace

import pytest

from bench.decisions.depth import OSCILLATION_S as OSCILLATION
from bench.decisions.depth import bounds, duration_s, run_depth
from bench.decisions.scenarios import DEPTH_SCENARIOS

SCENARIO = DEPTH_SCENARIOS["depth_by_load"]


def test_the_bounds_are_the_models_break_even_loads() -> None:
    assert bounds(SCENARIO) == [pytest.approx(4.35, abs=0.01), pytest.approx(7.69, abs=0.01)]
    assert duration_s(SCENARIO.phases) == 550.0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_the_ladder_follows_the_load_and_never_flaps(seed: int) -> None:
    r = run_depth(SCENARIO, seed)
    assert r.requests > 300_000
    crossings = r.band_crossings
    # up through both bounds, down through both, and up through the first again
    assert len(crossings) == 5, crossings
    # the first request's pick, then one switch per crossing: never more, never fewer
    assert r.switches[0][1:] == (3, 5, "load") and r.switches[0][0] < 1.0
    assert r.load_switches == len(crossings)
    assert [(a, b) for _, a, b, _ in r.switches[1:]] == [(5, 3), (3, 2), (2, 3), (3, 5), (5, 3)]
    # the four long ramps: each switch within two dwells of its crossing (in the
    # oscillation the rung itself moves the load: k = 5 carries more than k = 3 there)
    for (t, *_), crossed in zip(r.switches[1:5], crossings[:4], strict=True):
        assert abs(t - crossed) < 2 * SCENARIO.min_dwell_s, (t, crossed)
    assert r.min_gap_s >= SCENARIO.min_dwell_s
    # the load oscillates across the k = 5 / k = 3 break-even point inside its band
    bands, points = r.crossings_between(*OSCILLATION)
    assert points >= 10, points
    assert r.switches_between(*OSCILLATION) == bands <= 1
    assert r.resets == 0
    assert r.at_best(outside_bands=True) > 0.95
    assert r.at_best() > 0.8


def test_single_depths_and_the_oracle_serve_the_same_arrivals() -> None:
    short = replace(SCENARIO, phases=SCENARIO.phases[:2])  # 60 s at 1.5, then up to 6
    runs = {p: run_depth(short, 3, p) for p in ("ladder", "k=5", "oracle")}
    assert len({r.requests for r in runs.values()}) == 1
    fixed = runs["k=5"]
    assert fixed.switches == [] and {k for sec in fixed.served for k in sec} == {5}
    assert {k for sec in runs["oracle"].served for k in sec} == {5, 3}
    # above the break-even k = 5 alone is slower per token than the ladder
    assert fixed.e2e_per_token_ms > runs["ladder"].e2e_per_token_ms
