"""The pure rules: hysteresis, dwell and back-off, with numbers and no database."""

from control.automation.verdicts import (
    Action,
    GuardReason,
    PoolHealth,
    judge_probation,
    probation_backoff_seconds,
)
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
