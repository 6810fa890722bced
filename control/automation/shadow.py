"""The shadow stage's exit rule, pure: from evidence to start-the-canary, roll back or hold.

In shadow the gateway serves every request of the segment from the baseline arm
and mirrors a sampled share to the spec pool (responses discarded), so the two
arms of the rollout's telemetry are the mirrors and the requests they copy. The
same monitors that guard a canary judge them (see `gather.py`), under the same
false-alarm budget, with no user exposed either way:

- a monitor's failure (acceptance rejected, latency or error regression beyond
  its margin) rolls the rollout back: the pair version needs work, not a canary;
- the canary starts when the acceptance SPRT accepts, the mean acceptance length
  reaches `min_mean_acceptance_length`, and latency is within bounds at the load
  the canary's first stage will put on the spec pool: the matched speedup's
  always-valid lower bound, over the mirrors measured at that load or above, is
  at least 1 / (1 + `latency_margin`) (not confidently slower than the margin),
  the matched p95 within the margin, and the error rate not confidently beyond
  its margin;
- a speedup confidently below that floor at the canary's load pauses, or rolls
  back with the threshold set's `no_benefit_action` = rollback (the shadow's
  own load showed no regression, but the canary's would: add spec workers or
  lower the first stage);
- no evidence at the canary's load holds with advice (the shadow mirrored a
  smaller share than the first stage sends, so the pool must be seen busier);
- otherwise hold, and pause after `max_inconclusive_rounds` holds.

The canary's load is projected as a canary's next stage is (`load_plan.load_plan`,
Little's law): from the share actually mirrored to the first stage's share, at
the segment's request rate (the callers' requests; mirrors are copies). When
`shadow_percentage` ≥ the first stage the projection is the load measured.
"""

from control.automation.evidence import Evidence
from control.automation.verdicts import (
    Action,
    HoldReason,
    Verdict,
    acceptance_accepted,
    error_rate_not_confidently_worse,
    failure_action,
    fmt_vs,
    mean_acceptance_length_reached,
    monitor_failures,
    no_benefit_action,
    p95_within_margin,
    speedup_at_next_load_at_least,
)
from control.models import ThresholdSet
from control.rollouts.gates import GateResult
from specwire import RolloutState

SHADOW_PASSED = "passed"


def latency_floor(t: ThresholdSet) -> float:
    """The slowest speedup within the latency margin: 1 / (1 + latency_margin)."""
    return 1.0 / (1.0 + t.latency_margin)


def shadow_checks(evidence: Evidence, t: ThresholdSet) -> dict[str, bool]:
    """The canary's checks where a shadow has their evidence (`verdicts`), at the canary's
    first-stage load and with the latency margin as the speedup's floor."""
    return {
        "acceptance_accepted": acceptance_accepted(evidence),
        "mean_acceptance_length": mean_acceptance_length_reached(evidence, t),
        "latency_at_canary_load": speedup_at_next_load_at_least(evidence, latency_floor(t)),
        "p95_within_margin": p95_within_margin(evidence, t),
        "error_rate_within_margin": error_rate_not_confidently_worse(evidence),
    }


def judge_shadow(
    evidence: Evidence,
    t: ThresholdSet,
    *,
    seconds_in_state: float,
    inconclusive_rounds: int,
) -> Verdict:
    if seconds_in_state < t.guard_dwell_seconds:
        return Verdict(Action.WAIT, f"guard dwell: {seconds_in_state:.0f} s")
    failures = monitor_failures(evidence)
    if failures:
        code, _ = failures[0]
        return Verdict(
            failure_action(RolloutState.SHADOW),
            "shadow failed: " + "; ".join(msg for _, msg in failures),
            code,
        )
    if seconds_in_state < t.stage_dwell_seconds:
        return Verdict(
            Action.WAIT, f"stage dwell: {seconds_in_state:.0f} s of {t.stage_dwell_seconds} s"
        )
    checks = shadow_checks(evidence, t)
    canary = evidence.next_stage
    if all(checks.values()):
        acceptance = evidence.acceptance
        assert acceptance is not None and acceptance.mean_acceptance_length is not None
        assert canary is not None and canary.speedup is not None
        return Verdict(
            Action.START,
            f"shadow passed on {evidence.spec.requests} mirrored requests: acceptance accepted "
            f"(mean acceptance length {acceptance.mean_acceptance_length:.2f}), speedup "
            f"{canary.speedup.speedup:.3f} (always-valid lower bound {canary.speedup.lower:.3f} "
            f">= {latency_floor(t):.3f}) at the canary's first-stage load ({canary.share_next:g} "
            f"%: about {canary.spec_load_next:.1f} requests per spec worker, projected from "
            f"{canary.spec_load_now:.1f} with {canary.share_now:g} % mirrored), errors within "
            "margin",
            SHADOW_PASSED,
            checks,
        )
    slow = canary.speedup if canary is not None and canary.advice is None else None
    if canary is not None and slow is not None and slow.upper < latency_floor(t):
        upper, bound = fmt_vs(slow.upper, latency_floor(t))
        return Verdict(
            no_benefit_action(RolloutState.SHADOW, t),
            f"too slow at the canary's first-stage load ({canary.share_next:g} %: about "
            f"{canary.spec_load_next:.1f} requests per spec worker): speedup "
            f"{slow.speedup:.3f}, always-valid upper bound {upper} < {bound} "
            "(1 / (1 + latency_margin))",
            HoldReason.NO_BENEFIT,
            checks,
        )
    failed = ", ".join(name for name, ok in checks.items() if not ok)
    advice = canary.advice if canary is not None else None
    hold = HoldReason.NO_EVIDENCE_AT_NEXT_LOAD if advice else HoldReason.INCONCLUSIVE
    reason = advice or f"shadow inconclusive (not yet: {failed})"
    if inconclusive_rounds + 1 >= t.max_inconclusive_rounds:
        return Verdict(
            Action.PAUSE,
            f"shadow inconclusive for {inconclusive_rounds + 1} rounds: {reason}",
            hold,
            checks,
            advice,
        )
    return Verdict(Action.HOLD, reason, hold, checks, advice)


def judge_offline(gate: GateResult) -> Verdict:
    """Offline → shadow as soon as the offline gate holds; otherwise keep waiting."""
    if not gate.holds:
        return Verdict(Action.WAIT, "; ".join(gate.missing))
    checks = {name: bool(c["passed"]) for name, c in gate.facts.get("checks", {}).items()}
    return Verdict(
        Action.START,
        f"offline evaluation {gate.facts['evaluation_id']} meets the offline criteria "
        f"(cost ratio {gate.facts['cost_ratio']:.3f} from {gate.facts['cost_ratio_source']})",
        "offline_passed",
        checks,
    )
