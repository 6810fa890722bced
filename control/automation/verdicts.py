"""Pure rules: from evidence, pool health and thresholds to what a job should do.

No database and no clock here, so every rule is tested directly with numbers.

Who may flip, and on what:
- The statistical monitors (acceptance SPRT-CUSUM, load-matched latency CUSUM,
  error-rate CUSUM, the output contract's paired greedy checks; see `gather.py`
  and `contract.py`) are valid under repeated looks and share
  one false-alarm budget, so the guard tick (15 s) and the evaluation (60 s)
  read the *same* monitors and reach the same verdict: a failure rolls back a
  canary or ramping rollout and disables a full or probation one (which
  probation may later re-test).
- Operational guards (memory pressure, draft unavailable, a saturating spec
  pool) disable at once: their own counters already require persistence.
- Promotion needs every check: acceptance accepted, mean acceptance length,
  the speedup's always-valid lower bound at the *next* stage's load above
  `min_speedup`, TTFT and p95 within their margins, no error regression.

Hysteresis, so a rollout does not flap:
- acceptance: disable on evidence of a rate at or below the minimum, promote
  (also out of probation) only on evidence of a rate at or above the minimum
  plus the indifference zone;
- memory: disable after N consecutive high-KV heartbeats, re-enable only when no
  worker has a single high beat left;
- dwell: the monitors start judging `guard_dwell_seconds` after the exposure
  began, promotion waits `stage_dwell_seconds` in a stage, and a disabled
  rollout waits `cooldown_seconds × 2^(disable_count-1)` before probation.
"""

import math
from dataclasses import dataclass, field
from enum import StrEnum

from control.automation.contract import ContractGuard
from control.automation.evidence import Evidence
from control.models import ThresholdSet
from control.rollouts.state_machine import RolloutAction
from control.stats import SprtDecision
from specwire import RolloutState


class Action(StrEnum):
    """What a rule decides: WAIT and HOLD change no state; every other member is the
    state machine's own action of that name (`flip`), so the verdict's word is the
    flip's, with no table between them."""

    WAIT = "wait"  # nothing to judge yet (dwell, or nothing wrong): no record
    HOLD = "hold"  # judged, inconclusive: counts one inconclusive round
    PROMOTE = RolloutAction.PROMOTE.value
    START = RolloutAction.START.value  # out of shadow into the canary
    PAUSE = RolloutAction.PAUSE.value
    ROLLBACK = RolloutAction.ROLLBACK.value
    DISABLE = RolloutAction.DISABLE.value
    ENABLE = RolloutAction.ENABLE.value

    @property
    def flip(self) -> RolloutAction | None:
        """The state machine's action this verdict applies; None for WAIT and HOLD."""
        if self in (Action.WAIT, Action.HOLD):
            return None
        return RolloutAction(self.value)


class GuardReason(StrEnum):
    MEMORY_PRESSURE = "memory_pressure"
    DRAFT_UNAVAILABLE = "draft_unavailable"
    # Every healthy spec worker serves other weights or another engine version than
    # the rollout's pair version: the arms would compare something else.
    IDENTITY_MISMATCH = "identity_mismatch"
    POOL_SATURATED = "pool_saturated"
    LOW_ACCEPTANCE = "low_acceptance"
    LATENCY_REGRESSION = "latency_regression"
    ERROR_REGRESSION = "error_regression"
    # Greedy requests answered by both arms differ more often than the allowed rate.
    OUTPUT_CONTRACT = "output_contract"


class HoldReason(StrEnum):
    INCONCLUSIVE = "inconclusive"
    NO_EVIDENCE_AT_NEXT_LOAD = "no_evidence_at_next_load"
    NO_BENEFIT = "no_benefit"  # conclusively not faster enough at the current load
    SETTLED = "settled"  # pays at this stage's load, conclusively not at the next one's
    # Every open check's estimate says "pass"; only its bound has not closed yet.
    ACCUMULATING = "accumulating"


# A stage whose open checks all point to a pass waits (ACCUMULATING, no inconclusive
# round counted) for at most this long per allowed inconclusive round: a non-inferiority
# bound at a 1 % canary needs several minutes of requests.
ACCUMULATING_SECONDS_PER_ROUND = 360.0


@dataclass(frozen=True)
class Verdict:
    action: Action
    reason: str
    code: str | None = None
    checks: dict[str, bool] = field(default_factory=dict)
    advice: str | None = None


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
    # Healthy workers whose model digest or engine version differs from the pair version.
    mismatched_workers: int = 0
    mismatch: str | None = None  # the first mismatched worker's typed reason

    @property
    def under_memory_pressure(self) -> bool:
        # NOTE: half of the healthy workers, not one: the gateway steers around a
        # single hot worker (least outstanding), a pool-wide squeeze it cannot.
        return self.healthy_workers > 0 and 2 * self.pressured_workers >= self.healthy_workers

    @property
    def memory_recovered(self) -> bool:
        return self.high_beat_workers == 0


def fmt_vs(value: float, bound: float, digits: int = 3) -> tuple[str, str]:
    """Both numbers with as many decimals as it takes to tell them apart, so a record never
    says "1.000 < 1" for 0.99958."""
    while digits < 12 and format(value, f".{digits}f") == format(bound, f".{digits}f"):
        digits += 1
    return format(value, f".{digits}f"), format(bound, f".{digits}f")


def contract_failure(contract: ContractGuard) -> str:
    """What the output contract's alarm says: the test that fired, with request ids."""
    test = contract.test
    if test.alarm:
        ids = ", ".join(contract.mismatched_ids[:5])
        return (
            f"output contract broken: {test.failures} of {test.trials} greedy pairs "
            f"differ between the arms ({test.observed_rate or 0:.1%}, allowed "
            f"{test.allowed_rate:.1%}): evidence ln {test.log_evidence:.1f} >= "
            f"{test.threshold:.1f}; unequal requests include {ids}"
        )
    if contract.sampled_higher_test.alarm:
        side, fired, ids_of = "more", contract.sampled_higher_test, contract.sampled_higher_ids
    else:
        assert contract.sampled_lower_test.alarm
        side, fired, ids_of = "less", contract.sampled_lower_test, contract.sampled_lower_ids
    return (
        f"output contract broken at T > 0: the target found the spec arm's completion "
        f"{side} likely in {fired.failures} of {fired.trials} sampled pairs "
        f"({fired.observed_rate or 0:.1%}; lossless is 50%, allowed up to "
        f"{fired.allowed_rate:.1%}): evidence ln {fired.log_evidence:.1f} >= "
        f"{fired.threshold:.1f}; such requests include {', '.join(ids_of[:5])}"
    )


def monitor_failures(evidence: Evidence) -> list[tuple[GuardReason, str]]:
    """What the sequential monitors found; each has already spent its share of the budget."""
    failures: list[tuple[GuardReason, str]] = []
    # The output contract first: a rollout whose arms answer differently fails on that.
    contract = evidence.output_contract
    if contract is not None and contract.alarm:
        failures.append((GuardReason.OUTPUT_CONTRACT, contract_failure(contract)))
    monitor = evidence.acceptance_monitor
    if monitor is not None and monitor.decision is SprtDecision.REJECT:
        failures.append(
            (
                GuardReason.LOW_ACCEPTANCE,
                f"acceptance {monitor.observed_rate or 0:.3f} over {monitor.requests} requests "
                f"(design effect {monitor.design_effect:.1f}): the CUSUM of the SPRT for rate <= "
                f"{monitor.unacceptable_rate:.2f} vs >= {monitor.acceptable_rate:.2f} reached "
                f"{monitor.cusum_peak:.1f} >= {monitor.reject_threshold:.1f}",
            )
        )
    latency = evidence.latency_guard
    if latency is not None and latency.cusum.alarm:
        c = latency.cusum
        failures.append(
            (
                GuardReason.LATENCY_REGRESSION,
                f"spec arm slower than baseline at matched load by more than "
                f"{latency.margin:.0%} in end-to-end time per token: CUSUM {c.peak:.1f} >= "
                f"{c.threshold:.1f} (last block: {_pct_slower(c.last_estimate)})",
            )
        )
    errors = evidence.error_guard
    if errors is not None and errors.cusum.alarm:
        failures.append(
            (
                GuardReason.ERROR_REGRESSION,
                f"error rate {errors.spec_rate or 0:.2%} spec vs {errors.baseline_rate or 0:.2%} "
                f"baseline, worse by more than the margin {errors.margin:.2%}: CUSUM "
                f"{errors.cusum.peak:.1f} >= {errors.cusum.threshold:.1f}",
            )
        )
    return failures


def _pct_slower(log_difference: float | None) -> str:
    if log_difference is None:
        return "n/a"
    return f"{math.expm1(log_difference):+.1%} spec vs baseline"


def failure_action(state: RolloutState) -> Action:
    """Shadow, canary and ramping roll back (an admin restarts them); full and probation
    disable, so probation can re-test once the cause has cleared."""
    if state in (RolloutState.SHADOW, RolloutState.CANARY, RolloutState.RAMPING):
        return Action.ROLLBACK
    return Action.DISABLE


def _monitor_verdict(
    state: RolloutState, evidence: Evidence, thresholds: ThresholdSet, seconds_exposed: float
) -> Verdict | None:
    if seconds_exposed < thresholds.guard_dwell_seconds:
        return None
    failures = monitor_failures(evidence)
    if not failures:
        return None
    code, _ = failures[0]
    return Verdict(failure_action(state), "; ".join(msg for _, msg in failures), code)


# -- the checks a stage's exit needs (the canary's and the shadow's share the first four)


def acceptance_accepted(evidence: Evidence) -> bool:
    """The acceptance SPRT accepted: a rate at or above the minimum plus indifference."""
    monitor = evidence.acceptance_monitor
    return monitor is not None and monitor.decision is SprtDecision.ACCEPT


def mean_acceptance_length_reached(evidence: Evidence, thresholds: ThresholdSet) -> bool:
    acceptance = evidence.acceptance
    return (
        acceptance is not None
        and acceptance.mean_acceptance_length is not None
        and acceptance.mean_acceptance_length >= thresholds.min_mean_acceptance_length
    )


def speedup_at_next_load_at_least(evidence: Evidence, floor: float) -> bool:
    """The matched speedup's always-valid lower bound at the next stage's load (from
    shadow: the canary's first stage) is at least `floor`, with nothing left to advise."""
    next_stage = evidence.next_stage
    return (
        next_stage is not None
        and next_stage.advice is None
        and next_stage.speedup is not None
        and next_stage.speedup.lower >= floor
    )


def p95_within_margin(evidence: Evidence, thresholds: ThresholdSet) -> bool:
    return evidence.p95_ratio is not None and evidence.p95_ratio <= 1 + thresholds.latency_margin


def error_rate_not_worse(evidence: Evidence) -> bool:
    """Non-inferiority since the exposure began: the always-valid upper bound of the
    error-rate difference (spec - baseline) below the margin, and no alarm."""
    errors = evidence.error_guard
    return (
        errors is not None
        and not errors.cusum.alarm
        and errors.noninferiority is not None
        and errors.noninferiority.upper <= errors.margin
    )


def error_rate_not_confidently_worse(evidence: Evidence) -> bool:
    """This stage's error-rate difference not confidently beyond the margin (its lower
    bound at most the margin), and no alarm: what a shadow, with no user exposed, needs."""
    errors = evidence.error_guard
    return (
        errors is not None
        and not errors.cusum.alarm
        and errors.stage is not None
        and errors.stage.lower <= errors.margin
    )


def promotion_checks(evidence: Evidence, thresholds: ThresholdSet) -> dict[str, bool]:
    """Every check promotion needs. Each asks for evidence that the spec arm is *not worse*
    than its margin (an upper bound below it), never the mere absence of proof that it is."""
    return {
        "acceptance_accepted": acceptance_accepted(evidence),
        "mean_acceptance_length": mean_acceptance_length_reached(evidence, thresholds),
        "speedup_at_next_load": speedup_at_next_load_at_least(evidence, thresholds.min_speedup),
        "ttft_within_margin": evidence.ttft_ratio_upper is not None
        and evidence.ttft_ratio_upper <= 1 + thresholds.ttft_margin,
        "p95_within_margin": p95_within_margin(evidence, thresholds),
        "error_rate_within_margin": error_rate_not_worse(evidence),
        "recent_windows_not_worse": recent_not_worse(evidence, thresholds),
    }


def recent_not_worse(evidence: Evidence, thresholds: ThresholdSet) -> bool:
    """The latest windows on their own, one standard error of slack: still at least
    `min_speedup` faster, and errors within the margin. A regression that began a window
    or two ago moves the stage's interval little, and no monitor has alarmed yet."""
    recent, errors = evidence.recent, evidence.error_guard
    if recent is None or recent.log_difference is None or recent.log_difference_se is None:
        return False
    if recent.log_difference - recent.log_difference_se > -math.log(thresholds.min_speedup):
        return False
    if errors is None or recent.error_difference is None or recent.error_difference_se is None:
        return False
    return recent.error_difference - recent.error_difference_se <= errors.margin


def _points_to_pass(check: str, evidence: Evidence, thresholds: ThresholdSet) -> bool:
    """Whether an open check's point estimate is on the passing side of its bar (so more
    requests would close its bound), for the checks that are bounds on an estimate."""
    ns, errors = evidence.next_stage, evidence.error_guard
    if check == "speedup_at_next_load":
        return (
            ns is not None
            and ns.speedup is not None
            and ns.speedup.speedup >= thresholds.min_speedup
        )
    if check == "ttft_within_margin":
        return evidence.ttft_ratio is not None and evidence.ttft_ratio <= 1 + thresholds.ttft_margin
    if check == "error_rate_within_margin":
        ni = errors.noninferiority if errors is not None else None
        return (
            errors is not None
            and not errors.cusum.alarm
            and ni is not None
            and ni.estimate <= errors.margin
        )
    return False


def judge_canary(
    state: RolloutState,
    evidence: Evidence,
    thresholds: ThresholdSet,
    *,
    seconds_in_state: float,
    seconds_exposed: float,
    inconclusive_rounds: int,
) -> Verdict:
    """Canary/ramping/probation: roll back (probation: disable) on a monitor's failure,
    promote when every check passes after the stage dwell, else hold; pause (or, as the
    threshold set says, roll back) when the evidence says speculation does not pay here;
    pause after too many inconclusive holds."""
    failed = _monitor_verdict(state, evidence, thresholds, seconds_exposed)
    if failed is not None:
        return failed
    if seconds_in_state < thresholds.stage_dwell_seconds:
        return Verdict(
            Action.WAIT,
            f"stage dwell: {seconds_in_state:.0f} s of {thresholds.stage_dwell_seconds} s",
        )
    checks = promotion_checks(evidence, thresholds)
    if all(checks.values()):
        ns = evidence.next_stage
        assert ns is not None and ns.speedup is not None
        return Verdict(
            Action.PROMOTE,
            f"acceptance, latency and errors pass; speedup {ns.speedup.speedup:.3f} (always-valid "
            f"lower bound {ns.speedup.lower:.3f} >= {thresholds.min_speedup:g}) at the load of "
            f"{ns.share_next:g} % (about {ns.spec_load_next:.1f} requests per spec worker)",
            checks=checks,
        )
    return _not_promoted(state, evidence, thresholds, checks, inconclusive_rounds, seconds_in_state)


def no_benefit_action(state: RolloutState, thresholds: ThresholdSet) -> Action:
    """The threshold set's choice for a stage that conclusively does not pay: pause, or
    fail it like a monitor would (roll back a canary or ramping rollout, disable the rest)."""
    if thresholds.no_benefit_action == "rollback":
        return failure_action(state)
    return Action.PAUSE


def _not_promoted(
    state: RolloutState,
    evidence: Evidence,
    thresholds: ThresholdSet,
    checks: dict[str, bool],
    inconclusive_rounds: int,
    seconds_in_state: float,
) -> Verdict:
    failed = ", ".join(name for name, ok in checks.items() if not ok)
    here = evidence.stage.get("e2e_per_token")
    ns = evidence.next_stage
    if here is not None and here.upper < thresholds.min_speedup:
        upper, bound = fmt_vs(here.upper, thresholds.min_speedup)
        return Verdict(
            no_benefit_action(state, thresholds),
            f"no benefit at this stage's load: speedup {here.speedup:.3f}, always-valid upper "
            f"bound {upper} < min_speedup {bound}",
            HoldReason.NO_BENEFIT,
            checks,
        )
    if (
        ns is not None
        and ns.speedup is not None
        and ns.speedup.upper < thresholds.min_speedup
        and here is not None
        and here.lower >= thresholds.min_speedup
    ):
        upper, bound = fmt_vs(ns.speedup.upper, thresholds.min_speedup)
        return Verdict(
            Action.WAIT,
            f"settled at {ns.share_now:g} %: speculation pays at this load (speedup lower bound "
            f"{here.lower:.3f}) but not at the next stage's ({ns.spec_load_next:.1f} requests "
            f"per worker: upper bound {upper} < {bound})",
            HoldReason.SETTLED,
            checks,
        )
    advice = ns.advice if ns is not None else None
    open_checks = [name for name, ok in checks.items() if not ok]
    if (
        advice is None
        and seconds_in_state < ACCUMULATING_SECONDS_PER_ROUND * thresholds.max_inconclusive_rounds
        and all(_points_to_pass(name, evidence, thresholds) for name in open_checks)
    ):
        return Verdict(
            Action.WAIT,
            f"accumulating: every estimate points to a pass, the bounds of {failed} have "
            f"not closed yet",
            HoldReason.ACCUMULATING,
            checks,
        )
    code = HoldReason.NO_EVIDENCE_AT_NEXT_LOAD if advice else HoldReason.INCONCLUSIVE
    reason = f"{advice}" if advice else f"inconclusive (not yet: {failed})"
    if inconclusive_rounds + 1 >= thresholds.max_inconclusive_rounds:
        return Verdict(
            Action.PAUSE,
            f"inconclusive for {inconclusive_rounds + 1} rounds: {reason}",
            code,
            checks,
            advice,
        )
    return Verdict(Action.HOLD, reason, code, checks, advice)


def judge_guards(
    state: RolloutState,
    evidence: Evidence,
    health: PoolHealth,
    thresholds: ThresholdSet,
    *,
    seconds_exposed: float,
) -> Verdict:
    """Operational guards first (they disable at once), then the statistical monitors."""
    if health.under_memory_pressure:
        return Verdict(
            Action.DISABLE,
            f"{health.pressured_workers} of {health.healthy_workers} healthy spec workers above "
            f"{thresholds.max_kv_cache_usage:.0%} KV-cache usage for "
            f"{thresholds.memory_pressure_beats}+ heartbeats",
            GuardReason.MEMORY_PRESSURE,
        )
    if health.healthy_workers > 0 and health.mismatched_workers == health.healthy_workers:
        return Verdict(
            Action.DISABLE,
            f"no spec worker matches the pair version: all {health.healthy_workers} healthy "
            f"workers report {health.mismatch}",
            GuardReason.IDENTITY_MISMATCH,
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
    if evidence.saturation.saturated:
        waiting = ", ".join(f"{w:.1f}" for w in evidence.saturation.recent_waiting)
        return Verdict(
            Action.DISABLE,
            f"spec pool saturating: requests waiting in the engine at dispatch grew every "
            f"window ({waiting})",
            GuardReason.POOL_SATURATED,
        )
    failed = _monitor_verdict(state, evidence, thresholds, seconds_exposed)
    if failed is not None:
        return failed
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
