"""The scenario catalog: what the automation faces, and what the right answer is.

Every scenario runs a rollout from canary through the README's stages
(1 → 5 → 25 → 50 → 100 %) with the README's thresholds (min acceptance 0.3,
min speedup 1.05, min samples 200, stage dwell 120 s, guard dwell 60 s) and
the threshold set's defaults for the rest (false-alarm rate 0.01 over 1,000
windows, 10 % latency margin, 1 point / 50 % error margin, 10 % holdout).

Traffic (unless a scenario says otherwise): 2,000 requests per 10 s window,
outputs of 32-256 tokens at 5 ms per token on an idle worker, 40 workers per
pool, so the baseline pool carries about 4 requests per worker at a canary and
the spec pool about 3 at full.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from bench.decisions.traffic import ArmModel, TrafficModel

README_THRESHOLDS: dict[str, Any] = {
    "min_acceptance_rate": 0.3,
    "min_mean_acceptance_length": 1.5,
    "min_speedup": 1.05,
    "max_kv_cache_usage": 0.9,
    "min_samples": 200,
    "stage_dwell_seconds": 120,
    "guard_dwell_seconds": 60,
    "probation_percentage": 2.0,
    "cooldown_seconds": 600,
}

TRAFFIC = TrafficModel(
    requests_per_window=2000.0,
    min_tokens=32,
    max_tokens=256,
    spec_workers=40,
    baseline_workers=40,
)

BASELINE = ArmModel(tpot_ms=5.0, load_slope=0.04, ttft_ms=40.0, error_rate=0.01)
# A pair that pays: 1.3x faster per token, acceptance 0.8, the same 1 % errors.
GOOD = ArmModel(tpot_ms=5.0 / 1.3, load_slope=0.04, ttft_ms=40.0, error_rate=0.01, acceptance=0.8)
# Identical to the baseline in everything (acceptance 0.6 is what it drafts).
NULL = replace(BASELINE, acceptance=0.6)


class Expect(StrEnum):
    NO_FLIP = "no_flip"  # identical arms: never disabled, rolled back or promoted
    FULL = "full"  # reaches full, never disabled or rolled back
    DETECT = "detect"  # a regression after the onset is rolled back or disabled
    LOAD_CAPPED = "load_capped"  # never promoted past the last stage that still pays
    DISABLE = "disable"  # disabled or rolled back with `reason`, never promoted
    NO_FALSE_FLIP = "no_false_flip"  # never disabled or rolled back


class Trigger(StrEnum):
    START = "start"
    RAMPING = "ramping"
    FULL = "full"


@dataclass(frozen=True)
class Onset:
    trigger: Trigger
    windows: int  # windows after the trigger state was first entered


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    spec: ArmModel
    expect: Expect
    baseline: ArmModel = BASELINE
    traffic: TrafficModel = TRAFFIC
    thresholds: dict[str, Any] = field(default_factory=lambda: dict(README_THRESHOLDS))
    stages: tuple[float, ...] = (1.0, 5.0, 25.0, 50.0, 100.0)
    onset: Onset | None = None
    spec_after: ArmModel | None = None
    kv_after: float | None = None
    spec_down_after: bool = False
    reason: str | None = None  # the guard code a DISABLE scenario expects
    # DISABLE: whether an earlier promotion is wrong. A weak pair must never be promoted;
    # a good pair whose pool later runs out of memory may have been, before it did.
    never_promote: bool = True
    windows: int = 150  # windows simulated in all
    windows_after_full: int = 40  # stop this many windows after reaching full


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "null",
        "spec and baseline identical (acceptance 0.6); the baseline's streams arrive in "
        "bursts 15 % of the time (TPOT reads ~0)",
        spec=NULL,
        baseline=replace(BASELINE, burst_probability=0.15),
        expect=Expect.NO_FLIP,
    ),
    Scenario(
        "good",
        "acceptance 0.8, 1.3x faster per token, the same 1 % errors",
        spec=GOOD,
        expect=Expect.FULL,
        windows=200,
        windows_after_full=30,
    ),
    Scenario(
        "ramp_latency",
        "good pair that turns 25 % slower per token 3 windows into the ramp (5 %)",
        spec=GOOD,
        onset=Onset(Trigger.RAMPING, 3),
        spec_after=replace(GOOD, tpot_ms=5.0 * 1.25),
        expect=Expect.DETECT,
    ),
    Scenario(
        "full_latency",
        "good pair that turns 25 % slower per token 5 windows after full",
        spec=GOOD,
        onset=Onset(Trigger.FULL, 5),
        spec_after=replace(GOOD, tpot_ms=5.0 * 1.25),
        expect=Expect.DETECT,
        windows=220,
    ),
    Scenario(
        "full_errors",
        "good pair (2 % errors, as the baseline) whose errors go to 8 % 5 windows after full",
        spec=replace(GOOD, error_rate=0.02),
        baseline=replace(BASELINE, error_rate=0.02),
        onset=Onset(Trigger.FULL, 5),
        spec_after=replace(GOOD, error_rate=0.08),
        expect=Expect.DETECT,
        windows=220,
    ),
    Scenario(
        "load_loser",
        "1.4x faster on an idle worker, but slows 30 % per request in flight (baseline 4 %): "
        "pays up to 25 % of the traffic, loses beyond",
        spec=replace(GOOD, tpot_ms=5.0 / 1.4, load_slope=0.3),
        expect=Expect.LOAD_CAPPED,
        windows=100,
    ),
    Scenario(
        "weak",
        "acceptance 0.25 against min acceptance 0.3, otherwise as fast as the baseline",
        spec=replace(NULL, acceptance=0.25),
        expect=Expect.DISABLE,
        reason="low_acceptance",
    ),
    Scenario(
        "memory",
        "good pair whose spec workers report 95 % KV-cache use from the 4th window",
        spec=GOOD,
        onset=Onset(Trigger.START, 3),
        kv_after=0.95,
        expect=Expect.DISABLE,
        reason="memory_pressure",
        never_promote=False,
    ),
    Scenario(
        "draft_outage",
        "good pair whose spec workers go down in the 10th window",
        spec=GOOD,
        onset=Onset(Trigger.START, 9),
        spec_down_after=True,
        expect=Expect.DISABLE,
        reason="draft_unavailable",
        never_promote=False,
    ),
    Scenario(
        "tiny",
        "good pair on ~6 requests per window",
        spec=GOOD,
        traffic=replace(TRAFFIC, requests_per_window=6.0, spec_workers=1, baseline_workers=1),
        expect=Expect.NO_FALSE_FLIP,
    ),
)

BY_NAME = {s.name: s for s in SCENARIOS}
