"""The evidence bundle on simulated telemetry windows of two arms."""

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from control.contract import Arm, LatencyHistogram, TelemetryWindow
from control.stats import SprtConfig, SprtDecision, compare_arms
from tests.control.stats.simulate import accepted_prefix, bucketize

START = datetime(2025, 3, 1, tzinfo=UTC)
SPRT = SprtConfig(acceptable_rate=0.7, unacceptable_rate=0.6, min_trials=200)


def _windows(
    rng: np.random.Generator,
    arm: Arm,
    count: int,
    requests: int,
    latency_scale: float = 1.0,
    error_rate: float = 0.02,
    acceptance: float | None = None,
) -> list[TelemetryWindow]:
    """`count` one-minute windows as a gateway would flush them for one arm."""
    out = []
    for i in range(count):
        tpot = rng.lognormal(math.log(25.0 * latency_scale), 0.4, requests)  # [requests]
        e2e = rng.lognormal(math.log(900.0 * latency_scale), 0.6, requests)  # [requests]
        per_position: list[int] = []
        drafts = 0
        if acceptance is not None:
            drafts = requests * 20
            accepted = accepted_prefix(rng, np.full(3, acceptance), drafts)  # [drafts, 3]
            per_position = [int(v) for v in accepted.sum(axis=0)]
        out.append(
            TelemetryWindow(
                segment_id=3,
                arm=arm,
                window_start=START + timedelta(minutes=i),
                window_seconds=60,
                requests=requests,
                errors=int(rng.binomial(requests, error_rate)),
                drafts=drafts,
                drafted_tokens=3 * drafts,
                accepted_tokens=sum(per_position),
                accepted_per_position=per_position,
                tpot=LatencyHistogram(counts=bucketize(tpot).tolist(), sum_ms=float(tpot.sum())),
                e2e=LatencyHistogram(counts=bucketize(e2e).tolist(), sum_ms=float(e2e.sum())),
            )
        )
    return out


def test_null_arms_raise_family_false_alarms_within_the_level() -> None:
    rng = np.random.default_rng(31)
    comparisons, family_level = 150, 0.05
    alarms = 0
    for i in range(comparisons):
        result = compare_arms(
            _windows(rng, Arm.SPEC, 4, 60, acceptance=0.75),
            _windows(rng, Arm.BASELINE, 4, 60),
            SPRT,
            level=family_level / 3,  # Bonferroni over the three regression tests
            resamples=200,
            seed=i,
        )
        assert result.tpot and result.e2e and result.errors
        alarms += result.tpot.regression or result.e2e.regression or result.errors.worse
    assert alarms / comparisons <= family_level + 3 * math.sqrt(
        family_level * (1 - family_level) / comparisons
    )


def test_regressed_spec_arm_is_flagged_on_every_count() -> None:
    rng = np.random.default_rng(32)
    result = compare_arms(
        _windows(rng, Arm.SPEC, 5, 200, latency_scale=1.2, error_rate=0.06, acceptance=0.5),
        _windows(rng, Arm.BASELINE, 5, 200, error_rate=0.02),
        SPRT,
    )
    assert result.spec_windows == 5 and result.baseline_requests == 1000
    assert result.sprt is not None and result.sprt.decision is SprtDecision.REJECT
    assert result.acceptance.alpha == pytest.approx(0.5, abs=0.02)
    assert result.tpot is not None and result.tpot.regression
    assert result.tpot.speedup.upper < 1.0
    assert result.e2e is not None and result.e2e.regression
    assert result.errors is not None and result.errors.worse
    assert result.missing == ()
    # The bundle is the decision row's evidence: it must survive a JSON round trip.
    assert type(result).model_validate_json(result.model_dump_json()) == result


def test_missing_inputs_are_named_not_raised() -> None:
    rng = np.random.default_rng(33)
    result = compare_arms(_windows(rng, Arm.SPEC, 2, 50), [], SPRT)
    assert result.missing == ("sprt", "tpot", "e2e", "errors")
    assert result.acceptance.alpha is None
    assert result.sprt is None and result.tpot is None
