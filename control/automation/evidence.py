"""Telemetry windows of a rollout's two arms turned into the statistics that decide.

Everything a verdict rests on is kept in one frozen model, so the decision row
stores exactly the numbers the rule saw (`Evidence.as_json()`), with the ids of
the windows they were summed from. A statistic that cannot be computed (an empty
arm, no per-position counters) is None and its reason is listed in `missing`:
the verdicts treat missing evidence as "hold", never as pass or fail.
"""

import math
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy.orm import Session

from control.automation import repository
from control.contract import Arm
from control.models import Rollout, ThresholdSet
from control.settings import ControlSettings
from control.stats import (
    AcceptanceEstimate,
    LatencyComparison,
    ProportionComparison,
    SprtConfig,
    SprtResult,
    StatsError,
    WindowTotals,
    combine_windows,
    compare_error_rates,
    compare_latency,
    estimate_acceptance,
    sprt_acceptance,
)

# TPOT is what speculation changes (tokens per target pass); end-to-end also
# carries queueing and prefill, so it is kept as evidence but does not decide.
DECIDING_LATENCY = "tpot"


class ArmSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    window_ids: list[int]
    requests: int
    errors: int
    completion_tokens: int


class ThresholdRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: int
    name: str
    version: int


class Evidence(BaseModel):
    model_config = ConfigDict(frozen=True)

    since: datetime
    until: datetime
    thresholds: ThresholdRef
    spec: ArmSummary
    baseline: ArmSummary
    acceptance: AcceptanceEstimate | None
    sprt: SprtResult | None
    tpot: LatencyComparison | None
    e2e: LatencyComparison | None
    error_rate: ProportionComparison | None
    missing: list[str]

    def as_json(self) -> dict[str, Any]:
        document = json_safe(self.model_dump(mode="json"))
        assert isinstance(document, dict)
        return document

    @property
    def window_ids(self) -> list[int]:
        return sorted(self.spec.window_ids + self.baseline.window_ids)


def json_safe(value: Any) -> Any:
    """Non-finite floats as strings ("inf", "nan"): JSON has no such numbers and
    PostgreSQL's json type rejects them (Fisher's odds ratio is inf with no baseline
    errors, for instance)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def sprt_config(thresholds: ThresholdSet, settings: ControlSettings) -> SprtConfig:
    """H0: acceptance >= the threshold set's minimum; H1: acceptance <= minimum - gap."""
    acceptable = min(max(thresholds.min_acceptance_rate, 0.02), 0.99)
    return SprtConfig(
        acceptable_rate=acceptable,
        unacceptable_rate=max(acceptable - settings.sprt_indifference, 0.01),
        alpha=thresholds.sprt_alpha,
        beta=thresholds.sprt_beta,
        min_trials=max(thresholds.min_samples, 1),
    )


def _summary(ids: list[int], totals: WindowTotals) -> ArmSummary:
    return ArmSummary(
        window_ids=ids,
        requests=totals.requests,
        errors=totals.errors,
        completion_tokens=totals.completion_tokens,
    )


def gather_evidence(
    session: Session,
    rollout: Rollout,
    settings: ControlSettings,
    *,
    since: datetime,
    until: datetime,
) -> Evidence:
    thresholds = rollout.threshold_set
    spec_ids, spec_windows = repository.arm_windows(session, rollout, Arm.SPEC, since, until)
    base_ids, base_windows = repository.arm_windows(session, rollout, Arm.BASELINE, since, until)
    spec = combine_windows(spec_windows)
    baseline = combine_windows(base_windows)
    missing: list[str] = []

    acceptance: AcceptanceEstimate | None = None
    sprt: SprtResult | None = None
    if spec.drafts == 0:
        missing.append("no drafts in the spec arm")
    else:
        try:
            acceptance = estimate_acceptance(spec)
            sprt = sprt_acceptance(spec, sprt_config(thresholds, settings))
        except StatsError as exc:
            missing.append(f"acceptance: {exc}")

    tpot = _latency(spec, baseline, "tpot", missing)
    e2e = _latency(spec, baseline, "e2e", missing)

    error_rate: ProportionComparison | None = None
    if spec.requests == 0 or baseline.requests == 0:
        missing.append("no requests in one of the arms")
    else:
        error_rate = compare_error_rates(
            spec.errors,
            spec.requests,
            baseline.errors,
            baseline.requests,
            level=thresholds.error_rate_alpha,
        )

    return Evidence(
        since=since,
        until=until,
        thresholds=ThresholdRef(id=thresholds.id, name=thresholds.name, version=thresholds.version),
        spec=_summary(spec_ids, spec),
        baseline=_summary(base_ids, baseline),
        acceptance=acceptance,
        sprt=sprt,
        tpot=tpot,
        e2e=e2e,
        error_rate=error_rate,
        missing=missing,
    )


def _latency(
    spec: WindowTotals, baseline: WindowTotals, metric: str, missing: list[str]
) -> LatencyComparison | None:
    spec_hist = getattr(spec, metric)
    base_hist = getattr(baseline, metric)
    if spec_hist.total == 0 or base_hist.total == 0:
        missing.append(f"{metric}: no latency samples in one of the arms")
        return None
    return compare_latency(spec_hist, base_hist, metric)
