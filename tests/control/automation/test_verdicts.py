"""The pure rules: hysteresis, dwell and back-off, with numbers and no database."""

import math
from datetime import UTC, datetime
from typing import Any

from control.automation.evidence import Evidence, NextStage, Saturation, StageComparison
from control.automation.verdicts import (
    Action,
    GuardReason,
    PoolHealth,
    Verdict,
    fmt_vs,
    judge_canary,
    judge_guards,
    judge_probation,
    probation_backoff_seconds,
)
from control.contract import RolloutState
from tests.control.automation.scenario import threshold_row


def _health(**overrides: object) -> PoolHealth:
    values: dict[str, object] = {
        "workers": 2,
        "healthy_workers": 2,
        "pressured_workers": 0,
        "high_beat_workers": 0,
        "max_kv_cache_usage": 0.3,
        "draft_available": True,
        "unavailable_seconds": 0.0,
    }
    return PoolHealth(**(values | overrides))  # type: ignore[arg-type]


def test_probation_backoff_doubles_with_each_disable() -> None:
    thresholds = threshold_row(cooldown_seconds=60)
    assert [probation_backoff_seconds(thresholds, n) for n in (1, 2, 3, 4)] == [60, 120, 240, 480]


def test_memory_pressure_needs_half_the_healthy_workers() -> None:
    assert not _health(pressured_workers=0).under_memory_pressure
    assert _health(pressured_workers=1).under_memory_pressure  # 1 of 2
    assert not _health(healthy_workers=3, pressured_workers=1).under_memory_pressure
    assert not _health(healthy_workers=0, pressured_workers=0).under_memory_pressure


def test_probation_waits_for_cooldown_and_for_memory_to_clear() -> None:
    thresholds = threshold_row(cooldown_seconds=10)
    reason = GuardReason.MEMORY_PRESSURE.value

    def judge(seconds: float, count: int, **health: object) -> Action:
        verdict = judge_probation(
            reason,
            _health(**health),
            thresholds,
            seconds_in_state=seconds,
            disable_count=count,
        )
        return verdict.action

    assert judge(9, 1) is Action.WAIT
    assert judge(10, 1) is Action.ENABLE
    assert judge(19, 2) is Action.WAIT  # second disable: 20 s
    # Hysteresis: one high beat left is enough to keep it off.
    assert judge(30, 1, high_beat_workers=1) is Action.WAIT
    assert judge(30, 1, draft_available=False) is Action.WAIT


def _evidence(**fields: Any) -> Evidence:
    """Evidence with nothing measured but what `fields` sets (built without validation)."""
    now = datetime(2030, 1, 1, tzinfo=UTC)
    values: dict[str, Any] = {
        "exposed_since": now,
        "stage_since": now,
        "until": now,
        "acceptance": None,
        "acceptance_monitor": None,
        "latency_guard": None,
        "error_guard": None,
        "stage": {},
        "ttft_ratio": None,
        "p95_ratio": None,
        "next_stage": None,
        "saturation": Saturation(recent_waiting=[], saturated=False),
        "blocks": {},
        "missing": [],
    }
    return Evidence.model_construct(**(values | fields))


def _speedup(speedup: float, lower: float, upper: float) -> StageComparison:
    return StageComparison(
        metric="e2e_per_token",
        speedup=speedup,
        lower=lower,
        upper=upper,
        log_difference=-math.log(speedup),
        spec_requests=500,
        baseline_requests=500,
        blocks=10,
    )


def _next_stage(speedup: StageComparison | None, advice: str | None = None) -> NextStage:
    return NextStage(
        share_now=25.0,
        share_next=50.0,
        segment_rate_per_s=100.0,
        spec_workers=4,
        spec_load_now=1.0,
        spec_load_next=3.0,
        load_bucket=3,
        load_floor=3,
        speedup=speedup,
        advice=advice,
    )


def _canary(evidence: Evidence, rounds: int = 0) -> Verdict:
    return judge_canary(
        RolloutState.RAMPING,
        evidence,
        threshold_row(min_speedup=1.05, max_inconclusive_rounds=3),
        seconds_in_state=1e6,
        seconds_exposed=1e6,
        inconclusive_rounds=rounds,
    )


def test_no_benefit_rolls_back_or_disables_where_the_threshold_set_says_so() -> None:
    here_loses = _evidence(stage={"e2e_per_token": _speedup(0.8, 0.7, 0.95)})
    rollback = threshold_row(min_speedup=1.0, no_benefit_action="rollback")

    def judge(state: RolloutState, thresholds: Any) -> Verdict:
        return judge_canary(
            state,
            here_loses,
            thresholds,
            seconds_in_state=1e6,
            seconds_exposed=1e6,
            inconclusive_rounds=0,
        )

    assert (
        judge(RolloutState.CANARY, rollback).action,
        judge(RolloutState.CANARY, rollback).code,
    ) == (
        Action.ROLLBACK,
        "no_benefit",
    )
    assert judge(RolloutState.RAMPING, rollback).action is Action.ROLLBACK
    assert judge(RolloutState.PROBATION, rollback).action is Action.DISABLE
    assert "upper bound 0.950 < min_speedup 1.000" in judge(RolloutState.CANARY, rollback).reason
    # The default keeps the rollout for an admin.
    paused = judge(RolloutState.CANARY, threshold_row(min_speedup=1.0))
    assert (paused.action, paused.code) == (Action.PAUSE, "no_benefit")
    # An upper bound above the bar is not "no benefit", whatever the setting.
    unsure = _evidence(stage={"e2e_per_token": _speedup(0.95, 0.85, 1.01)})
    verdict = judge_canary(
        RolloutState.CANARY,
        unsure,
        rollback,
        seconds_in_state=1e6,
        seconds_exposed=1e6,
        inconclusive_rounds=0,
    )
    assert verdict.action is Action.HOLD


def test_no_benefit_here_pauses_and_a_loss_only_at_the_next_load_settles() -> None:
    here_loses = _evidence(stage={"e2e_per_token": _speedup(1.0, 0.98, 1.02)})
    verdict = _canary(here_loses)
    assert (verdict.action, verdict.code) == (Action.PAUSE, "no_benefit")
    # The bound that decided is printed with the digits that tell it from the bar.
    assert "upper bound 1.020 < min_speedup 1.050" in verdict.reason
    settled = _evidence(
        stage={"e2e_per_token": _speedup(1.3, 1.2, 1.4)},
        next_stage=_next_stage(_speedup(0.9, 0.85, 0.95)),
    )
    verdict = _canary(settled, rounds=2)
    assert (verdict.action, verdict.code) == (Action.WAIT, "settled")
    no_evidence = _evidence(
        stage={"e2e_per_token": _speedup(1.3, 1.2, 1.4)},
        next_stage=_next_stage(None, advice="add spec workers or promote in smaller steps"),
    )
    verdict = _canary(no_evidence)
    assert (verdict.action, verdict.code) == (Action.HOLD, "no_evidence_at_next_load")
    assert verdict.advice is not None and "smaller steps" in verdict.advice
    assert _canary(no_evidence, rounds=2).action is Action.PAUSE


def test_fmt_vs_never_prints_a_bound_equal_to_its_bar() -> None:
    assert fmt_vs(0.99958, 1.0) == ("0.9996", "1.0000")
    assert fmt_vs(0.9, 1.0) == ("0.900", "1.000")


def test_a_saturating_spec_pool_is_disabled_by_the_guard() -> None:
    evidence = _evidence(saturation=Saturation(recent_waiting=[0.5, 1.0, 2.0, 4.0], saturated=True))
    verdict = judge_guards(
        RolloutState.FULL, evidence, _health(), threshold_row(), seconds_exposed=1e6
    )
    assert (verdict.action, verdict.code) == (Action.DISABLE, GuardReason.POOL_SATURATED)
    assert "0.5, 1.0, 2.0, 4.0" in verdict.reason
    calm = _evidence(saturation=Saturation(recent_waiting=[0.0, 0.1, 0.0, 0.2], saturated=False))
    assert (
        judge_guards(
            RolloutState.FULL, calm, _health(), threshold_row(), seconds_exposed=1e6
        ).action
        is Action.WAIT
    )
