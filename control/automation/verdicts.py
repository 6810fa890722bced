"""Pure rules: from evidence, pool health and thresholds to what a job should do.

No database and no clock here, so every rule is tested directly with numbers.

Hysteresis, so a rollout does not flap between on and off:
- acceptance: a guard disables only when the SPRT *rejects* (evidence that the
  rate is at or below the unacceptable rate), while promotion, also out of
  probation, needs the SPRT to *accept* (evidence of the acceptable rate);
- memory: a guard disables after N consecutive high-KV heartbeats, while
  probation re-enables only when no worker has a single high beat left;
- dwell: statistical guards wait `guard_dwell_seconds` in a state before they
  judge, promotion waits `stage_dwell_seconds`, and a disabled rollout waits
  `cooldown_seconds × 2^(disable_count-1)` before probation.
"""

from dataclasses import dataclass, field
from enum import StrEnum

from control.automation.evidence import Evidence
from control.contract import RolloutState
from control.models import ThresholdSet
from control.stats import SprtDecision


class Action(StrEnum):
    WAIT = "wait"  # nothing to judge yet (dwell, or nothing wrong): no record
    HOLD = "hold"  # judged, inconclusive: counts one inconclusive round
    PROMOTE = "promote"
    PAUSE = "pause"
    ROLLBACK = "rollback"
    DISABLE = "disable"
    ENABLE = "enable"


class GuardReason(StrEnum):
    MEMORY_PRESSURE = "memory_pressure"
    DRAFT_UNAVAILABLE = "draft_unavailable"
    LOW_ACCEPTANCE = "low_acceptance"
    SLOWER_THAN_BASELINE = "slower_than_baseline"
    CANARY_FAILED = "canary_failed"


@dataclass(frozen=True)
class Verdict:
    action: Action
    reason: str
    code: str | None = None
    checks: dict[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class PoolHealth:
    """What the guards know about the spec pool from its workers' heartbeats."""

    workers: int
    healthy_workers: int
    pressured_workers: int
    high_beat_workers: int  # healthy workers with at least one high-KV beat
    max_kv_cache_usage: float
    draft_available: bool
    unavailable_seconds: float  # 0 while a healthy worker with the draft is fresh

    @property
    def under_memory_pressure(self) -> bool:
        # NOTE: half of the healthy workers, not one: the gateway steers around a
        # single hot worker (least outstanding), a pool-wide squeeze it cannot.
        return self.healthy_workers > 0 and 2 * self.pressured_workers >= self.healthy_workers

    @property
    def memory_recovered(self) -> bool:
        return self.high_beat_workers == 0


def _enough_samples(evidence: Evidence, thresholds: ThresholdSet) -> bool:
    return (
        evidence.spec.requests >= thresholds.min_samples
        and evidence.baseline.requests >= thresholds.min_samples
    )


def canary_failures(evidence: Evidence, thresholds: ThresholdSet) -> list[str]:
    """Evidence that the spec arm is worse; each failure needs its own minimum sample."""
    failures: list[str] = []
    if evidence.sprt is not None and evidence.sprt.decision is SprtDecision.REJECT:
        failures.append(
            f"acceptance {evidence.sprt.observed_rate:.3f} over {evidence.sprt.trials} judged "
            f"positions: SPRT rejects rate >= {evidence.sprt.acceptable_rate:.2f}"
        )
    if not _enough_samples(evidence, thresholds):
        return failures
    if evidence.tpot is not None:
        if evidence.tpot.regression:
            failures.append(
                f"TPOT regression: spec slower (Mann-Whitney p = "
                f"{evidence.tpot.mann_whitney.p_value:.2g})"
            )
        elif evidence.tpot.speedup.upper < 1.0:
            failures.append(f"TPOT speedup CI upper bound {evidence.tpot.speedup.upper:.3f} < 1")
    if evidence.error_rate is not None and evidence.error_rate.worse:
        failures.append(
            f"error rate {evidence.error_rate.spec_rate:.3%} vs baseline "
            f"{evidence.error_rate.baseline_rate:.3%} (p = {evidence.error_rate.p_value:.2g})"
        )
    return failures


def promotion_checks(evidence: Evidence, thresholds: ThresholdSet) -> dict[str, bool]:
    acceptance = evidence.acceptance
    return {
        "min_samples": _enough_samples(evidence, thresholds),
        "sprt_accepts": evidence.sprt is not None and evidence.sprt.decision is SprtDecision.ACCEPT,
        "mean_acceptance_length": acceptance is not None
        and acceptance.mean_acceptance_length is not None
        and acceptance.mean_acceptance_length >= thresholds.min_mean_acceptance_length,
        "speedup_ci": evidence.tpot is not None
        and evidence.tpot.speedup.lower >= thresholds.min_speedup,
        "error_rate": evidence.error_rate is not None and not evidence.error_rate.worse,
    }


def judge_canary(
    state: RolloutState,
    evidence: Evidence,
    thresholds: ThresholdSet,
    *,
    seconds_in_state: float,
    inconclusive_rounds: int,
) -> Verdict:
    """Canary/ramping/probation: roll back (probation: disable) on failure, promote when
    every check passes after the stage dwell, else hold; pause after too many holds."""
    failures = canary_failures(evidence, thresholds)
    if failures:
        # Failing fast needs no dwell: the evidence already meets its own minimum.
        if state is RolloutState.PROBATION:
            return Verdict(Action.DISABLE, "; ".join(failures), GuardReason.CANARY_FAILED)
        return Verdict(Action.ROLLBACK, "; ".join(failures), GuardReason.CANARY_FAILED)
    if seconds_in_state < thresholds.stage_dwell_seconds:
        return Verdict(
            Action.WAIT,
            f"stage dwell: {seconds_in_state:.0f} s of {thresholds.stage_dwell_seconds} s",
        )
    checks = promotion_checks(evidence, thresholds)
    if all(checks.values()):
        return Verdict(Action.PROMOTE, "acceptance, speedup and error rate pass", checks=checks)
    failed = ", ".join(name for name, ok in checks.items() if not ok)
    if inconclusive_rounds + 1 >= thresholds.max_inconclusive_rounds:
        return Verdict(
            Action.PAUSE,
            f"inconclusive for {inconclusive_rounds + 1} rounds (not yet: {failed})",
            "inconclusive",
            checks,
        )
    return Verdict(Action.HOLD, f"inconclusive (not yet: {failed})", "inconclusive", checks)


def judge_guards(
    evidence: Evidence,
    health: PoolHealth,
    thresholds: ThresholdSet,
    *,
    seconds_in_state: float,
) -> Verdict:
    """The first tripped guard disables; operational guards (memory, draft) act at once
    because their own counters already require persistence, statistical ones after
    the guard dwell."""
    if health.under_memory_pressure:
        return Verdict(
            Action.DISABLE,
            f"{health.pressured_workers} of {health.healthy_workers} healthy spec workers above "
            f"{thresholds.max_kv_cache_usage:.0%} KV-cache usage for "
            f"{thresholds.memory_pressure_beats}+ heartbeats",
            GuardReason.MEMORY_PRESSURE,
        )
    if not health.draft_available and (
        health.unavailable_seconds >= thresholds.draft_unavailable_seconds
    ):
        return Verdict(
            Action.DISABLE,
            f"no healthy spec worker with the draft loaded for "
            f"{health.unavailable_seconds:.0f} s (limit {thresholds.draft_unavailable_seconds} s)",
            GuardReason.DRAFT_UNAVAILABLE,
        )
    if seconds_in_state < thresholds.guard_dwell_seconds:
        return Verdict(Action.WAIT, "guard dwell")
    sprt = evidence.sprt
    if sprt is not None and sprt.decision is SprtDecision.REJECT:
        return Verdict(
            Action.DISABLE,
            f"sustained low acceptance: {sprt.observed_rate:.3f} over {sprt.trials} judged "
            f"positions, SPRT rejects rate >= {sprt.acceptable_rate:.2f}",
            GuardReason.LOW_ACCEPTANCE,
        )
    if (
        evidence.tpot is not None
        and _enough_samples(evidence, thresholds)
        and evidence.tpot.speedup.upper < 1.0
    ):
        return Verdict(
            Action.DISABLE,
            f"TPOT speedup {evidence.tpot.speedup.speedup:.3f}, CI upper bound "
            f"{evidence.tpot.speedup.upper:.3f} < 1",
            GuardReason.SLOWER_THAN_BASELINE,
        )
    return Verdict(Action.WAIT, "no guard tripped")


def probation_backoff_seconds(thresholds: ThresholdSet, disable_count: int) -> float:
    """cooldown × 2^(disable_count - 1): each repeated failure doubles the wait."""
    return float(thresholds.cooldown_seconds * 2 ** max(disable_count - 1, 0))


def judge_probation(
    disabled_reason: str | None,
    health: PoolHealth,
    thresholds: ThresholdSet,
    *,
    seconds_in_state: float,
    disable_count: int,
) -> Verdict:
    """A rollout disabled by automation is re-exposed after its back-off, and only once
    the condition that disabled it has cleared (memory, draft)."""
    backoff = probation_backoff_seconds(thresholds, disable_count)
    if seconds_in_state < backoff:
        return Verdict(Action.WAIT, f"cool-down: {seconds_in_state:.0f} s of {backoff:.0f} s")
    if not health.draft_available:
        return Verdict(Action.WAIT, "draft still unavailable")
    if disabled_reason == GuardReason.MEMORY_PRESSURE and not health.memory_recovered:
        return Verdict(Action.WAIT, "spec pool still reports high KV-cache usage")
    return Verdict(
        Action.ENABLE,
        f"cool-down of {backoff:.0f} s after disable #{disable_count} elapsed and "
        f"{disabled_reason or 'the cause'} cleared: re-expose at "
        f"{thresholds.probation_percentage:g} % on probation",
        "probation",
    )
