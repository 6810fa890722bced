"""TTFT is read at the next stage's load only inside the arms' own TTFT lines' range."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from control.automation import gather
from control.automation.gather import TTFT, Arms, ttft_at_next_stage
from control.stats.load_model import LoadLine, SlopePair


def _line(low: float, high: float) -> LoadLine:
    return LoadLine(
        level=3.0,
        center=(low + high) / 2,
        slope=0.01,
        own_slope_information=100.0,
        residual_variance=0.04,
        lack_of_fit=1.0,
        requests=1000,
        load_low=low,
        load_high=high,
    )


def _arms(spec: LoadLine, base: LoadLine) -> Arms:
    slopes = SlopePair(spec=0.01, baseline=0.01, covariance=((1e-4, 0.0), (0.0, 1e-4)))
    return cast(Arms, SimpleNamespace(lines={TTFT: (spec, base, slopes)}))


def test_a_load_beyond_the_ttft_lines_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[float] = []
    monkeypatch.setattr(gather, "stage_comparison", lambda arms, m, load: read.append(load))
    # Spec seen at 0-1 (readable to 3), baseline at 4-6 (readable 1-9): 3.5 is beyond spec.
    arms = _arms(_line(0.0, 1.0), _line(4.0, 6.0))
    comparison, missing = ttft_at_next_stage(arms, 3.5)
    assert comparison is None and read == []
    assert missing == [
        "ttft: the next stage's load 3.50 lies beyond what the arms' TTFT lines may be "
        "read at (1.00-3.00)"
    ]


def test_a_load_inside_both_ranges_is_compared(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, float]] = []

    def compare(arms: Any, metric: int, load: float) -> tuple[None, list[str]]:
        calls.append((metric, load))
        return None, []

    monkeypatch.setattr(gather, "stage_comparison", compare)
    assert ttft_at_next_stage(_arms(_line(0.0, 1.0), _line(1.5, 6.0)), 2.5) == (None, [])
    assert calls == [(TTFT, 2.5)]
