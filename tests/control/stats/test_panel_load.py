"""The panel's per-stratum load: exact sums where the gateway sent them, midpoints where not."""

from datetime import UTC, datetime
from types import SimpleNamespace

import numpy as np

from control.stats.panel import BUCKET_MIDPOINTS, build_panel, window_arrays

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _window(slices: list[dict[str, object]]) -> SimpleNamespace:
    empty = {"counts": [0] * 62}
    hist = {"counts": [0] * 30 + [3] + [0] * 31, "sum_ms": 30.0}
    return SimpleNamespace(
        window_start=T0,
        window_seconds=10,
        requests=3,
        errors=0,
        client_errors=0,
        drafts=0,
        drafted_tokens=0,
        accepted_tokens=0,
        accepted_per_position=[],
        histograms={
            "e2e": hist,
            "by_load": [
                {**sl, "ttft": hist, "tpot": empty, "e2e_per_token": hist} for sl in slices
            ],
        },
        moments={},
    )


def test_strata_load_uses_recorded_sums_and_falls_back_to_the_buckets_midpoint() -> None:
    assert BUCKET_MIDPOINTS[:6] == (0.0, 1.0, 2.0, 3.0, 4.5, 6.5)
    recorded = window_arrays(_window([{"load_bucket": 4, "requests": 3, "load_sum": 14}]))
    older = window_arrays(_window([{"load_bucket": 4, "requests": 3}]))
    panel = build_panel({T0: 0}, 1, [recorded, older])
    assert panel.strata_load.shape[1:] == (16, 2)
    np.testing.assert_allclose(panel.strata_load[0, 4], [6.0, 14.0 + 3 * 4.5])
