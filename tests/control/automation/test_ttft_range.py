"""TTFT is read at the next stage's load only inside the arms' own TTFT lines' range."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from control.automation import gather
from control.automation.evidence import NextStage, StageComparison
from control.automation.gather import TTFT, Arms, ttft_at_next_stage, ttft_evidence
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


def _next_stage(load_next: float, readable: tuple[float, float] | None) -> NextStage:
    return NextStage(
        share_now=50.0,
        share_next=90.0,
        segment_rate_per_s=10.0,
        spec_workers=2,
        spec_load_now=1.0,
        spec_load_next=load_next,
        load_bucket=1,
        load_floor=1,
        speedup=None,
        advice="beyond" if readable is None or load_next > readable[1] else None,
        readable_loads=readable,
    )


def test_ttft_follows_the_next_stage_only_where_the_end_to_end_lines_reach(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, float]] = []

    def compare(arms: Any, metric: int, load: float) -> tuple[None, list[str]]:
        calls.append((metric, load))
        return None, ["compared"]

    monkeypatch.setattr(gather, "stage_comparison", compare)
    arms = _arms(_line(0.0, 1.0), _line(0.0, 6.0))
    here = cast(StageComparison, object())
    # At full there is no next stage: TTFT is this stage's own comparison.
    assert ttft_evidence(arms, None, here) == (here, [])
    # A projection beyond the end-to-end lines (the ceiling, 1000): nothing read, and no
    # reason of TTFT's own, since the next stage's advice already says why.
    assert ttft_evidence(arms, _next_stage(1000.0, (0.0, 5.0)), here) == (None, [])
    assert ttft_evidence(arms, _next_stage(2.0, None), here) == (None, [])
    assert calls == []
    # Inside them, TTFT is read at that load on its own lines.
    assert ttft_evidence(arms, _next_stage(2.0, (0.0, 5.0)), here) == (None, ["compared"])
    assert calls == [(TTFT, 2.0)]
