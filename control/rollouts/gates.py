"""The evidence each stage's exit needs before `start` may move a rollout on.

Offline → shadow: the latest offline evaluation of the rollout's pair version on
the latest version of the segment's eval set meets the threshold set's offline
criteria. A regression on one of the set's blocking boundary cases (control.rollouts.blocking)
fails it too, and no waiver lifts that. Shadow → canary: the shadow's exit
criterion, judged by the automation
(control.automation.shadow); an admin `start` out of shadow needs a waiver.

A gate that fails names every piece of missing evidence, so the 409 says what
to run next.
"""

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy.orm import Session

from control.evaluations import repository as eval_repo
from control.models import Rollout
from control.rollouts.blocking import BlockingCheck, check_blocking_cases
from control.stats import StatsError, expected_speedup


class StageGate(StrEnum):
    """The evidence a stage's exit needs (what `start` checks, or an admin waives)."""

    OFFLINE_EVALUATION = "offline_evaluation"
    SHADOW = "shadow"


@dataclass
class GateResult:
    evidence: StageGate
    missing: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    # The segment's blocking boundary cases (offline gate only): no waiver lifts them.
    blocking: BlockingCheck | None = None

    @property
    def holds(self) -> bool:
        return not self.missing


def offline_gate(session: Session, rollout: Rollout) -> GateResult:
    result = GateResult(StageGate.OFFLINE_EVALUATION)
    name = rollout.segment.eval_set
    if name is None:
        result.missing.append(
            f"segment {rollout.segment.name!r} names no eval set (set the segment's eval_set)"
        )
        return result
    eval_set = eval_repo.latest_set(session, name)
    if eval_set is None:
        result.missing.append(f"eval set {name!r} does not exist")
        return result
    result.facts["eval_set"] = {"id": eval_set.id, "name": name, "version": eval_set.version}
    version = rollout.pair_version
    evaluation = eval_repo.latest_evaluation(session, version.id, eval_set.id)
    result.blocking = check_blocking_cases(session, rollout, eval_set, evaluation)
    if result.blocking.checked:
        result.facts["blocking_cases"] = result.blocking.facts()
    for regression in result.blocking.regressions:
        result.missing.append(
            f"blocking case {regression['case_key']} ({regression['boundary']}): "
            f"{regression['reason']}"
        )
    if evaluation is None:
        result.missing.append(
            f"no offline evaluation of pair version {version.id} on eval set {name} "
            f"v{eval_set.version} (run `specroute engine evaluate --pair-version {version.id} "
            f"--eval-set {name}`)"
        )
        return result
    t = rollout.threshold_set
    k = version.num_speculative_tokens
    measured = eval_repo.measured_cost_ratio(session, rollout.spec_pool_id)
    cost_ratio = measured[0] if measured else evaluation.cost_ratio
    try:
        speedup = expected_speedup(evaluation.position_acceptance, k, cost_ratio)
    except StatsError as exc:
        result.missing.append(f"offline evaluation {evaluation.id}: {exc}")
        return result
    stale_fraction = len(evaluation.stale_case_keys) / max(evaluation.cases, 1)
    checks = {
        "cases": (evaluation.cases, t.offline_min_cases, evaluation.cases >= t.offline_min_cases),
        "mean_acceptance_length": (
            evaluation.mean_acceptance_length,
            t.offline_min_mean_acceptance_length,
            evaluation.mean_acceptance_length >= t.offline_min_mean_acceptance_length,
        ),
        "expected_speedup": (
            speedup,
            t.offline_min_expected_speedup,
            speedup >= t.offline_min_expected_speedup,
        ),
        "stale_fraction": (
            stale_fraction,
            t.offline_max_stale_fraction,
            stale_fraction <= t.offline_max_stale_fraction,
        ),
    }
    result.facts.update(
        {
            "evaluation_id": evaluation.id,
            "k": k,
            "cost_ratio": cost_ratio,
            "cost_ratio_source": (
                f"depth recommendation {measured[1]} (spec pool)"
                if measured
                else f"offline evaluation {evaluation.id}"
            ),
            "training_set": evaluation.training_set,
            "stale_case_keys": evaluation.stale_case_keys,
            "threshold_set_id": t.id,
            "checks": {
                name: {"value": value, "bound": bound, "passed": passed}
                for name, (value, bound, passed) in checks.items()
            },
        }
    )
    relation = {"stale_fraction": "<="}
    for check, (value, bound, passed) in checks.items():
        if not passed:
            result.missing.append(
                f"offline evaluation {evaluation.id}: {check} {value:.4g} is not "
                f"{relation.get(check, '>=')} {bound:.4g}"
            )
    return result
