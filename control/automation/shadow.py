"""The shadow stage's exit rule, pure: from evidence to start-the-canary, roll back or hold.

In shadow the gateway serves every request of the segment from the baseline arm
and mirrors a sampled share to the spec pool (responses discarded), so the two
arms of the rollout's telemetry are the mirrors and the requests they copy. The
same monitors that guard a canary judge them (see `evidence.py`), under the same
false-alarm budget, with no user exposed either way:

- a monitor's failure (acceptance rejected, latency or error regression beyond
  its margin) rolls the rollout back: the pair version needs work, not a canary;
- the canary starts when the acceptance SPRT accepts, the mean acceptance length
  reaches `min_mean_acceptance_length`, and latency is within bounds at the load
  measured: the matched speedup's always-valid lower bound is at least
  1 / (1 + `latency_margin`) (not confidently slower than the margin), the
  matched p95 within the margin, and the error rate not confidently beyond its
  margin;
- otherwise hold, and pause after `max_inconclusive_rounds` holds.

The canary's first stage sends no more load to the spec pool than the shadow
did when `shadow_percentage` ≥ the first stage, so the load measured here is
the load the canary will meet or a higher one.
"""

from control.automation.evidence import Evidence
from control.automation.verdicts import Action, Verdict, failure_action, monitor_failures
from control.contract import RolloutState
from control.models import ThresholdSet
from control.rollouts.gates import GateResult
from control.stats import SprtDecision

SHADOW_PASSED = "passed"


def shadow_checks(evidence: Evidence, t: ThresholdSet) -> dict[str, bool]:
    acceptance, monitor = evidence.acceptance, evidence.acceptance_monitor
    here = evidence.stage.get("e2e_per_token")
    errors = evidence.error_guard
    return {
        "acceptance_accepted": monitor is not None and monitor.decision is SprtDecision.ACCEPT,
        "mean_acceptance_length": acceptance is not None
        and acceptance.mean_acceptance_length is not None
        and acceptance.mean_acceptance_length >= t.min_mean_acceptance_length,
        "latency_within_bounds": here is not None and here.lower >= 1.0 / (1.0 + t.latency_margin),
        "p95_within_margin": evidence.p95_ratio is not None
        and evidence.p95_ratio <= 1 + t.latency_margin,
        "error_rate_within_margin": errors is not None
        and not errors.cusum.alarm
        and errors.stage is not None
        and errors.stage.lower <= errors.margin,
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
    if all(checks.values()):
        here = evidence.stage["e2e_per_token"]
        acceptance = evidence.acceptance
        assert acceptance is not None and acceptance.mean_acceptance_length is not None
        return Verdict(
            Action.START,
            f"shadow passed on {evidence.spec.requests} mirrored requests: acceptance accepted "
            f"(mean acceptance length {acceptance.mean_acceptance_length:.2f}), speedup "
            f"{here.speedup:.3f} (always-valid lower bound {here.lower:.3f} >= "
            f"{1.0 / (1.0 + t.latency_margin):.3f}) at the measured load, errors within margin",
            SHADOW_PASSED,
            checks,
        )
    failed = ", ".join(name for name, ok in checks.items() if not ok)
    if inconclusive_rounds + 1 >= t.max_inconclusive_rounds:
        return Verdict(
            Action.PAUSE,
            f"shadow inconclusive for {inconclusive_rounds + 1} rounds (not yet: {failed})",
            "inconclusive",
            checks,
        )
    return Verdict(Action.HOLD, f"shadow inconclusive (not yet: {failed})", "inconclusive", checks)


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
