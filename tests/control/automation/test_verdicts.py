"""The pure rules: hysteresis, dwell and back-off, with numbers and no database."""

import math
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
from pydantic import BaseModel

from control.automation.evidence import (
    ArmSummary,
    ErrorGuard,
    Evidence,
    NextStage,
    Recent,
    Saturation,
    StageComparison,
)
from control.automation.load_plan import CANARY_FIRST_STAGE, NEXT_STAGE, LoadPlan, load_plan
from control.automation.shadow import judge_shadow
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
from control.models import Rollout
from control.rollouts.state_machine import RolloutAction
from control.stats import (
    AcceptanceEstimate,
    AcceptanceMonitor,
    ConfidenceSequence,
    CusumResult,
    SpecFlow,
    SprtDecision,
)
from specwire import RolloutState
from tests.control.automation.scenario import threshold_row

M = TypeVar("M", bound=BaseModel)


def _unvalidated(model: type[M], **fields: Any) -> M:
    """`model` with only `fields` set, built without validation: the rules under test read
    no other field. (The pydantic mypy plugin types model_construct as if every required
    field had to be given; pydantic itself leaves the others unset.)"""
    return model.model_construct(**fields)


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


def test_a_verdict_that_flips_names_the_state_machines_own_action() -> None:
    flips = {a: a.flip for a in Action if a.flip is not None}
    assert {a.value for a in flips} == {
        "promote",
        "start",
        "pause",
        "rollback",
        "disable",
        "enable",
    }
    assert all(isinstance(f, RolloutAction) and f.value == a.value for a, f in flips.items())
    assert Action.WAIT.flip is None and Action.HOLD.flip is None


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
        "ttft_ratio_upper": None,
        "p95_ratio": None,
        "recent": None,
        "next_stage": None,
        "saturation": Saturation(recent_waiting=[], saturated=False),
        "blocks": {},
        "missing": [],
    }
    return _unvalidated(Evidence, **(values | fields))


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


def _next_stage(
    speedup: StageComparison | None, advice: str | None = None, **fields: Any
) -> NextStage:
    values: dict[str, Any] = {
        "share_now": 25.0,
        "share_next": 50.0,
        "segment_rate_per_s": 100.0,
        "spec_workers": 4,
        "spec_load_now": 1.0,
        "spec_load_next": 3.0,
        "load_bucket": 3,
        "load_floor": 3,
    }
    return NextStage(speedup=speedup, advice=advice, **(values | fields))


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


def _rollout(state: RolloutState, percentage: float, stages: list[float]) -> Rollout:
    return Rollout(state=state.value, percentage=percentage, stages=stages)


def test_a_shadow_projects_to_the_canarys_first_stage() -> None:
    thresholds = threshold_row()
    # A 5 % shadow, canary from 25 %: 400 callers' requests in 10 s, 18 mirrors (the
    # in-flight cap skipped two). The mirrors are copies: the segment runs at 40 req/s.
    plan = load_plan(
        _rollout(RolloutState.SHADOW, 5.0, [25.0, 50.0, 100.0]),
        thresholds,
        spec_requests=18,
        baseline_requests=400,
        seconds=10.0,
    )
    assert plan == LoadPlan(
        target=CANARY_FIRST_STAGE, share_now=4.5, share_next=25.0, segment_rate_per_s=40.0
    )
    # Little's law: 20.5 % more of 40 req/s, each 0.5 s on one of 2 workers.
    load = SpecFlow(
        load_now=0.3,
        share_now=plan.share_now,
        segment_rate_per_s=plan.segment_rate_per_s,
        spec_latency_s=0.5,
        spec_workers=2,
    ).load_at(plan.share_next)
    assert load == pytest.approx(0.3 + 0.205 * 40.0 * 0.5 / 2)  # 2.35
    # A shadow at least as wide as the first stage is judged at the load it measured.
    wide = load_plan(
        _rollout(RolloutState.SHADOW, 10.0, [1.0, 5.0, 100.0]),
        thresholds,
        spec_requests=100,
        baseline_requests=1000,
        seconds=100.0,
    )
    assert (wide.share_now, wide.share_next, wide.segment_rate_per_s) == (10.0, 1.0, 10.0)
    assert SpecFlow(
        load_now=0.4,
        share_now=wide.share_now,
        segment_rate_per_s=wide.segment_rate_per_s,
        spec_latency_s=2.0,
        spec_workers=1,
    ).load_at(wide.share_next) == pytest.approx(0.4)
    # A canary's next stage counts both arms' requests; before full, the holdout stays.
    canary = load_plan(
        _rollout(RolloutState.RAMPING, 50.0, [1.0, 50.0, 100.0]),
        threshold_row(holdout_percentage=10.0),
        spec_requests=300,
        baseline_requests=300,
        seconds=60.0,
    )
    assert canary == LoadPlan(
        target=NEXT_STAGE, share_now=50.0, share_next=90.0, segment_rate_per_s=10.0
    )


def _passing_shadow(canary: NextStage | None) -> Evidence:
    accepted = _unvalidated(AcceptanceMonitor, decision=SprtDecision.ACCEPT)
    quiet = _unvalidated(CusumResult, alarm=False)
    return _evidence(
        acceptance=_unvalidated(AcceptanceEstimate, mean_acceptance_length=2.4),
        acceptance_monitor=accepted,
        error_guard=_unvalidated(
            ErrorGuard,
            margin=0.01,
            cusum=quiet,
            stage=_unvalidated(ConfidenceSequence, lower=-0.01, upper=0.01),
        ),
        p95_ratio=1.05,
        stage={"e2e_per_token": _speedup(1.3, 1.2, 1.4)},
        next_stage=canary,
        spec=ArmSummary(window_ids=[1], requests=180, errors=0, mean_load=0.3),
    )


def _shadow(evidence: Evidence, rounds: int = 0) -> Verdict:
    return judge_shadow(
        evidence,
        threshold_row(latency_margin=0.25, max_inconclusive_rounds=3),
        seconds_in_state=1e6,
        inconclusive_rounds=rounds,
    )


def _canary_stage(speedup: StageComparison | None, advice: str | None = None) -> NextStage:
    """A 4.5 % shadow before a 25 % canary: 0.3 requests per worker now, 2.35 then."""
    return _next_stage(
        speedup,
        advice,
        target=CANARY_FIRST_STAGE,
        share_now=4.5,
        share_next=25.0,
        segment_rate_per_s=40.0,
        spec_workers=2,
        spec_load_now=0.3,
        spec_load_next=2.35,
        load_bucket=2,
        load_floor=2,
    )


def test_the_shadow_starts_the_canary_only_on_evidence_at_the_canarys_load() -> None:
    # Latency floor 1 / 1.25 = 0.8: the lower bound at the canary's load must clear it.
    started = _shadow(_passing_shadow(_canary_stage(_speedup(1.1, 0.85, 1.3))))
    assert (started.action, started.code) == (Action.START, "passed")
    assert started.checks["latency_at_canary_load"] is True
    assert "lower bound 0.850 >= 0.800" in started.reason
    assert "canary's first-stage load (25 %: about 2.4 requests per spec worker" in started.reason
    assert "projected from 0.3 with 4.5 % mirrored" in started.reason
    # Fast at the idle load measured, but no mirrors seen at the canary's load: hold, advise.
    unseen = _passing_shadow(
        _canary_stage(None, advice="raise the shadow share (shadow_percentage)")
    )
    held = _shadow(unseen)
    assert (held.action, held.code) == (Action.HOLD, "no_evidence_at_next_load")
    assert held.checks["latency_at_canary_load"] is False
    assert held.advice is not None and "shadow_percentage" in held.advice
    assert _shadow(unseen, rounds=2).action is Action.PAUSE
    # Conclusively slower than the margin at the canary's load: pause, never a canary.
    too_slow = _passing_shadow(_canary_stage(_speedup(0.7, 0.6, 0.78)))
    slow = _shadow(too_slow)
    assert (slow.action, slow.code) == (Action.PAUSE, "no_benefit")
    assert "upper bound 0.780 < 0.800" in slow.reason
    # ... or a rollback, where the threshold set says so for stages that do not pay.
    rolled = judge_shadow(
        too_slow,
        threshold_row(latency_margin=0.25, no_benefit_action="rollback"),
        seconds_in_state=1e6,
        inconclusive_rounds=0,
    )
    assert (rolled.action, rolled.code) == (Action.ROLLBACK, "no_benefit")
    # Undecided at that load: hold, inconclusive.
    open_ = _shadow(_passing_shadow(_canary_stage(_speedup(0.9, 0.7, 1.1))))
    assert (open_.action, open_.code) == (Action.HOLD, "inconclusive")
    assert "latency_at_canary_load" in open_.reason


def _promotable(**fields: Any) -> Evidence:
    """Canary evidence on which every promotion check passes; `fields` overrides."""
    accepted = _unvalidated(AcceptanceMonitor, decision=SprtDecision.ACCEPT)
    quiet = _unvalidated(CusumResult, alarm=False)
    values: dict[str, Any] = {
        "acceptance": _unvalidated(AcceptanceEstimate, mean_acceptance_length=2.4),
        "acceptance_monitor": accepted,
        "error_guard": _unvalidated(
            ErrorGuard,
            margin=0.01,
            cusum=quiet,
            stage=_unvalidated(ConfidenceSequence, lower=-0.004, upper=0.006),
            noninferiority=_unvalidated(
                ConfidenceSequence, estimate=0.001, lower=-0.004, upper=0.006
            ),
        ),
        "ttft_ratio": 1.0,
        "ttft_ratio_upper": 1.1,
        "p95_ratio": 0.9,
        "recent": Recent(
            slots=2,
            log_difference=-0.2,
            log_difference_se=0.02,
            error_difference=0.0,
            error_difference_se=0.004,
        ),
        "stage": {"e2e_per_token": _speedup(1.25, 1.15, 1.35)},
        "next_stage": _next_stage(_speedup(1.25, 1.12, 1.4)),
    }
    return _evidence(**(values | fields))


def test_promotion_needs_the_error_differences_upper_bound_below_the_margin() -> None:
    assert _canary(_promotable()).action is Action.PROMOTE
    # Decision 230 of the fleet probe: spec 5.8 % vs baseline 2.0 %, lower bound +0.04
    # points (below the 1-point margin), upper far above it: not evidence of "not worse".
    worse = _unvalidated(
        ErrorGuard,
        margin=0.01,
        cusum=_unvalidated(CusumResult, alarm=False),
        noninferiority=_unvalidated(ConfidenceSequence, estimate=0.039, lower=0.0004, upper=0.075),
    )
    verdict = _canary(_promotable(error_guard=worse))
    assert verdict.action is Action.HOLD
    assert verdict.checks["error_rate_within_margin"] is False
    # Not yet shown, but the estimate is within the margin: wait for the bound to close,
    # without counting an inconclusive round.
    pending = _unvalidated(
        ErrorGuard,
        margin=0.01,
        cusum=_unvalidated(CusumResult, alarm=False),
        noninferiority=_unvalidated(ConfidenceSequence, estimate=0.002, lower=-0.01, upper=0.014),
    )

    def judge(seconds_in_state: float) -> Verdict:
        return judge_canary(
            RolloutState.RAMPING,
            _promotable(error_guard=pending),
            threshold_row(min_speedup=1.05, max_inconclusive_rounds=3),
            seconds_in_state=seconds_in_state,
            seconds_exposed=1e6,
            inconclusive_rounds=0,
        )

    waiting = judge(600.0)
    assert (waiting.action, waiting.code) == (Action.WAIT, "accumulating")
    # ... for a bounded time: past max_inconclusive_rounds x 360 s it is a plain hold.
    assert judge(3 * 360.0 + 1).action is Action.HOLD


def test_promotion_needs_ttfts_upper_bound_within_its_margin() -> None:
    verdict = _canary(_promotable(ttft_ratio=1.3, ttft_ratio_upper=1.4))  # margin 25 %
    assert verdict.action is Action.HOLD
    assert verdict.checks["ttft_within_margin"] is False


def test_promotion_waits_when_the_latest_windows_already_look_worse() -> None:
    """The stage's interval still clears min_speedup, but the last two windows are 20 %
    slower than the baseline, or their errors 6 points higher."""
    slower = Recent(
        slots=2,
        log_difference=0.18,
        log_difference_se=0.03,
        error_difference=0.0,
        error_difference_se=0.004,
    )
    erring = Recent(
        slots=2,
        log_difference=-0.2,
        log_difference_se=0.02,
        error_difference=0.06,
        error_difference_se=0.015,
    )
    for recent in (slower, erring):
        verdict = _canary(_promotable(recent=recent))
        assert verdict.action is Action.HOLD  # never "accumulating": not a bound to close
        assert verdict.checks["recent_windows_not_worse"] is False
    # One standard error of slack: a marginal pair's noisy last windows still pass.
    noisy = Recent(
        slots=2,
        log_difference=-0.03,
        log_difference_se=0.03,
        error_difference=0.012,
        error_difference_se=0.01,
    )
    assert _canary(_promotable(recent=noisy)).action is Action.PROMOTE
