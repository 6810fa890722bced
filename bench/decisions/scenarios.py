"""The scenario catalog: what the automation faces, and what the right answer is.

Every scenario runs a rollout from canary through the README's stages
(1 → 5 → 25 → 50 → 100 %) with the README's thresholds (min acceptance 0.3,
min speedup 1.05, min samples 200, stage dwell 120 s, guard dwell 60 s) and
the threshold set's defaults for the rest (false-alarm rate 0.01 over 1,000
windows, 10 % latency margin, 1 point / 50 % error margin, 10 % holdout).

Two traffic profiles, each a catalog of the same scenarios:

- **fleet** (the default): 200 requests/s (2,000 per 10 s window), outputs of
  8-32 tokens at 5 ms per token on an idle worker (TTFT 20 ms), about 0.12 s a
  request; per-token time grows 1 % and TTFT 2 % per request already in flight on
  the worker; max_num_seqs 64. Pools of 1, 4, 8 or 16 workers each (`--workers`):
  one baseline worker carries about 34 requests at a canary without queueing, each
  of 4 about 6.
- **legacy** (the suite before pools were sized): 2,000 requests per window,
  outputs of 32-256 tokens at 5 ms per token (TTFT 40 ms), 4 % slower per token
  per request in flight, 40 workers per pool, so the baseline pool carries about
  4 requests per worker at a canary and the spec pool about 3 at full.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from control.simulation.traffic import ArmModel, TrafficModel

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


class Expect(StrEnum):
    NO_FLIP = "no_flip"  # identical arms: never disabled, rolled back or promoted
    FULL = "full"  # reaches full, never disabled or rolled back
    DETECT = "detect"  # a regression after the onset is rolled back or disabled
    LOAD_CAPPED = "load_capped"  # never promoted past the last stage that still pays
    DISABLE = "disable"  # disabled or rolled back with `reason`, never promoted
    NO_FALSE_FLIP = "no_false_flip"  # never disabled or rolled back
    DRIFT = "drift"  # rolled back or disabled within 3 windows of crossing the margin


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
    baseline: ArmModel
    traffic: TrafficModel
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
    # DETECT mid-ramp: a promotion once this many regressed windows were ingested is wrong.
    late_promotion_windows: int | None = None
    # From the onset on, the spec's per-token time grows by this factor every window.
    drift_per_window: float = 0.0
    # Known true speedup: whether the last evaluation's interval covers it is scored.
    true_speedup: float | None = None


@dataclass(frozen=True)
class Profile:
    name: str
    traffic: TrafficModel  # spec_workers / baseline_workers: what `--workers` replaces
    baseline: ArmModel
    workers: tuple[int, ...]  # the pool sizes the suite runs by default
    load_loser_slope: float  # the load loser's slowdown per request in flight


FLEET = Profile(
    name="fleet",
    traffic=TrafficModel(
        requests_per_window=2000.0,
        min_tokens=8,
        max_tokens=32,
        max_num_seqs=64,
        spec_workers=4,
        baseline_workers=4,
    ),
    # NOTE: 1 % per request in flight, not the legacy 4 %: at 4 % one worker serving
    # 200 requests/s of 0.12 s requests has no stable load (its queue diverges).
    baseline=ArmModel(
        tpot_ms=5.0, load_slope=0.01, ttft_ms=20.0, ttft_load_slope=0.02, error_rate=0.01
    ),
    workers=(1, 4, 8, 16),
    load_loser_slope=0.2,
)
LEGACY = Profile(
    name="legacy",
    traffic=TrafficModel(
        requests_per_window=2000.0,
        min_tokens=32,
        max_tokens=256,
        spec_workers=40,
        baseline_workers=40,
    ),
    baseline=ArmModel(tpot_ms=5.0, load_slope=0.04, ttft_ms=40.0, error_rate=0.01),
    workers=(40,),
    load_loser_slope=0.3,
)
PROFILES = {p.name: p for p in (FLEET, LEGACY)}


def catalog(profile: Profile) -> tuple[Scenario, ...]:
    base, traffic = profile.baseline, profile.traffic
    tpot = base.tpot_ms
    # A pair that pays: 1.3x faster per token, acceptance 0.8, the same 1 % errors.
    good = replace(base, tpot_ms=tpot / 1.3, acceptance=0.8)
    # Identical to the baseline in everything (acceptance 0.6 is what it drafts).
    null = replace(base, acceptance=0.6)
    slower = replace(good, tpot_ms=tpot * 1.25)
    # The per-request log-normal spread times, 5 % of the time, a Pareto(1.5) stall.
    heavy: dict[str, Any] = {"stall_probability": 0.05, "stall_alpha": 1.5}
    return (
        Scenario(
            "null",
            "spec and baseline identical (acceptance 0.6); the baseline's streams arrive in "
            "bursts 15 % of the time (TPOT reads ~0)",
            spec=null,
            baseline=replace(base, burst_probability=0.15),
            traffic=traffic,
            expect=Expect.NO_FLIP,
            true_speedup=1.0,
        ),
        Scenario(
            "heavy_null",
            "spec and baseline identical and heavy-tailed: 5 % of requests stall by a "
            "Pareto(alpha 1.5) factor",
            spec=replace(null, **heavy),
            baseline=replace(base, **heavy),
            traffic=traffic,
            expect=Expect.NO_FLIP,
            true_speedup=1.0,
        ),
        Scenario(
            "good",
            "acceptance 0.8, 1.3x faster per token, the same 1 % errors",
            spec=good,
            baseline=base,
            traffic=traffic,
            expect=Expect.FULL,
            windows=200,
            windows_after_full=30,
        ),
        Scenario(
            "ramp_latency",
            "good pair that turns 25 % slower per token 3 windows into the ramp (5 %)",
            spec=good,
            baseline=base,
            traffic=traffic,
            onset=Onset(Trigger.RAMPING, 3),
            spec_after=slower,
            expect=Expect.DETECT,
            late_promotion_windows=2,
        ),
        Scenario(
            "ramp_errors",
            "good pair (2 % errors, as the baseline) whose errors go to 8 % 3 windows into "
            "the ramp (5 %)",
            spec=replace(good, error_rate=0.02),
            baseline=replace(base, error_rate=0.02),
            traffic=traffic,
            onset=Onset(Trigger.RAMPING, 3),
            spec_after=replace(good, error_rate=0.08),
            expect=Expect.DETECT,
            late_promotion_windows=2,
        ),
        Scenario(
            "full_latency",
            "good pair that turns 25 % slower per token 5 windows after full",
            spec=good,
            baseline=base,
            traffic=traffic,
            onset=Onset(Trigger.FULL, 5),
            spec_after=slower,
            expect=Expect.DETECT,
            windows=220,
        ),
        Scenario(
            "full_errors",
            "good pair (2 % errors, as the baseline) whose errors go to 8 % 5 windows after full",
            spec=replace(good, error_rate=0.02),
            baseline=replace(base, error_rate=0.02),
            traffic=traffic,
            onset=Onset(Trigger.FULL, 5),
            spec_after=replace(good, error_rate=0.08),
            expect=Expect.DETECT,
            windows=220,
        ),
        Scenario(
            "drift",
            "good pair whose per-token time grows 2 % per window from full on; right: "
            "caught within 3 windows of crossing the 10 % latency margin",
            spec=good,
            baseline=base,
            traffic=traffic,
            onset=Onset(Trigger.FULL, 0),
            drift_per_window=0.02,
            expect=Expect.DRIFT,
            windows=260,
            windows_after_full=60,
        ),
        Scenario(
            "load_loser",
            f"1.4x faster on an idle worker, but {profile.load_loser_slope:.0%} slower per "
            f"request in flight (baseline {base.load_slope:.0%}): pays at low per-worker "
            "load, loses beyond",
            spec=replace(good, tpot_ms=tpot / 1.4, load_slope=profile.load_loser_slope),
            baseline=base,
            traffic=traffic,
            expect=Expect.LOAD_CAPPED,
            windows=100,
        ),
        Scenario(
            "weak",
            "acceptance 0.25 against min acceptance 0.3, otherwise as fast as the baseline",
            spec=replace(null, acceptance=0.25),
            baseline=base,
            traffic=traffic,
            expect=Expect.DISABLE,
            reason="low_acceptance",
        ),
        Scenario(
            "memory",
            "good pair whose spec workers report 95 % KV-cache use from the 4th window",
            spec=good,
            baseline=base,
            traffic=traffic,
            onset=Onset(Trigger.START, 3),
            kv_after=0.95,
            expect=Expect.DISABLE,
            reason="memory_pressure",
            never_promote=False,
        ),
        Scenario(
            "draft_outage",
            "good pair whose spec workers go down in the 10th window",
            spec=good,
            baseline=base,
            traffic=traffic,
            onset=Onset(Trigger.START, 9),
            spec_down_after=True,
            expect=Expect.DISABLE,
            reason="draft_unavailable",
            never_promote=False,
        ),
        Scenario(
            "tiny",
            "good pair on ~6 requests per window",
            spec=good,
            baseline=base,
            traffic=replace(traffic, requests_per_window=6.0),
            expect=Expect.NO_FALSE_FLIP,
        ),
    )


CATALOGS: dict[str, dict[str, Scenario]] = {
    name: {s.name: s for s in catalog(p)} for name, p in PROFILES.items()
}
SCENARIOS = catalog(FLEET)
BY_NAME = CATALOGS[FLEET.name]


def with_workers(scenario: Scenario, workers: int) -> Scenario:
    """The scenario on pools of `workers` workers each (spec and baseline alike)."""
    traffic = replace(scenario.traffic, spec_workers=workers, baseline_workers=workers)
    return replace(scenario, traffic=traffic)


# --- depth by load ---------------------------------------------------------------------


@dataclass(frozen=True)
class LoadPhase:
    """`seconds` of offered per-worker load going linearly from `start` to `end`, plus a
    sine of `wobble` amplitude and `period_s` (the load oscillating near a point)."""

    seconds: float
    start: float
    end: float
    wobble: float = 0.0
    period_s: float = 10.0


@dataclass(frozen=True)
class DepthScenario:
    """A rollout whose spec arm has a depth ladder, on traffic whose load crosses the
    points where the best depth changes (bench/decisions/depth.py runs it).

    Each rung is a pool of `workers` workers serving the same pair at depth k; its
    latency model says how fast it is at each per-worker load, and the ladder's bounds
    are the break-even loads of neighbouring rungs' models (the load where their mean
    end-to-end time per token is equal)."""

    name: str
    description: str
    rungs: tuple[tuple[int, ArmModel], ...]  # (k, model), deepest first
    own_k: int  # the rollout's own spec pool's depth
    workers: int
    phases: tuple[LoadPhase, ...]
    traffic: TrafficModel
    hysteresis: float = 0.5
    min_dwell_s: float = 5.0
    acceptance_reset: float = 0.15


def _depth_rung(tpot_ms: float, load_slope: float) -> ArmModel:
    # The fleet profile's TTFT and errors; acceptance as the good pair's.
    return ArmModel(
        tpot_ms=tpot_ms,
        load_slope=load_slope,
        ttft_ms=20.0,
        ttft_load_slope=0.02,
        error_rate=0.0,
        acceptance=0.8,
    )


# Deeper proposals: fewer target passes per token on an idle worker, more verification
# work per pass under load (the break-even bench's shape: k=5 best at low load, k=3 and
# then k=2 as the load grows). Break-even loads of these models: about 4.3 (k=5 / k=3)
# and 7.7 (k=3 / k=2) requests in flight per worker.
DEPTH_RUNGS: tuple[tuple[int, ArmModel], ...] = (
    (5, _depth_rung(3.0, 0.12)),
    (3, _depth_rung(3.5, 0.07)),
    (2, _depth_rung(4.0, 0.045)),
)
DEPTH_SCENARIOS: dict[str, DepthScenario] = {
    s.name: s
    for s in (
        DepthScenario(
            "depth_by_load",
            "a k = 5 / 3 / 2 ladder on 16 workers per rung; the offered load climbs from 1.5 "
            "to 10 per worker and back (each break-even crossed twice), oscillates +-0.4 "
            "around the k = 5 / k = 3 break-even for 2 minutes (24 crossings of it), "
            "then climbs to 6",
            rungs=DEPTH_RUNGS,
            own_k=3,
            workers=16,
            phases=(
                LoadPhase(60, 1.5, 1.5),
                LoadPhase(30, 1.5, 6.0),
                LoadPhase(60, 6.0, 6.0),
                LoadPhase(30, 6.0, 10.0),
                LoadPhase(60, 10.0, 10.0),
                LoadPhase(30, 10.0, 1.5),
                LoadPhase(60, 1.5, 1.5),
                LoadPhase(20, 1.5, 4.6),
                LoadPhase(120, 4.6, 4.6, wobble=0.4, period_s=10.0),
                LoadPhase(20, 4.6, 6.0),
                LoadPhase(60, 6.0, 6.0),
            ),
            traffic=TrafficModel(
                min_tokens=8, max_tokens=32, max_num_seqs=64, spec_workers=16, k=5
            ),
        ),
    )
}
