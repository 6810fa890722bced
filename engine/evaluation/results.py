"""What `engine evaluate`'s runs add up to: the measured cases and the failed ones,
the acceptance tally, one result per case, and the POST /evaluations body.

A case an engine failed is in the body's `case_keys` with an `error` result and in
none of its aggregates (acceptance, slices, timing, perplexity). Where acceptance
came from the engine's counters (engine.evaluation.acceptance), no case result
carries drafts or accepted_per_position (null: not measured) and there are no
slices.
"""

import json
from dataclasses import dataclass
from typing import Any

from engine.evaluation.acceptance import PER_REQUEST
from engine.evaluation.measure import Tally, expected_speedups
from engine.evaluation.run import CaseRun, Cases, EvaluationError, case_temperature


@dataclass(frozen=True)
class Measured:
    """The cases every engine ran (what the aggregates are over) and the others."""

    cases: Cases
    spec: list[CaseRun]
    baseline: list[CaseRun] | None
    failed: dict[str, str]  # case key -> why an engine failed it


def case_failure(spec: CaseRun, baseline: CaseRun | None) -> str | None:
    """Why the case has no measurement: the speculating engine failed it, or the
    baseline engine did (then it is neither timed nor compared)."""
    if spec.error is not None:
        return spec.error
    if baseline is not None and baseline.error is not None:
        return f"baseline: {baseline.error}"
    return None


def measured(cases: Cases, spec: list[CaseRun], baseline: list[CaseRun] | None) -> Measured:
    assert len(spec) == len(cases) and (baseline is None or len(baseline) == len(cases))
    keep: list[int] = []
    failed: dict[str, str] = {}
    for i, (case, _prompt) in enumerate(cases):
        why = case_failure(spec[i], baseline[i] if baseline is not None else None)
        if why is None:
            keep.append(i)
        else:
            failed[case["case_key"]] = why
    return Measured(
        cases=[cases[i] for i in keep],
        spec=[spec[i] for i in keep],
        baseline=[baseline[i] for i in keep] if baseline is not None else None,
        failed=failed,
    )


def tally(cases: Cases, runs: list[CaseRun]) -> tuple[Tally, dict[str, Tally]]:
    """The acceptance tally overall and per label value, from per-request histograms."""
    overall = Tally()
    slices: dict[str, Tally] = {}
    for (case, _prompt), run in zip(cases, runs, strict=True):
        assert run.histogram is not None, case["case_key"]
        overall.add(run.histogram)
        for key, value in sorted((case.get("labels") or {}).items()):
            slices.setdefault(f"{key}={value}", Tally()).add(run.histogram)
    return overall, slices


def case_results(
    cases: Cases,
    spec: list[CaseRun],
    baseline: list[CaseRun] | None,
    *,
    k: int,
    temperature: float,
    per_case: bool = True,
) -> list[dict[str, Any]]:
    """One result per case, by its key (numbers and an outcome; the texts stay here):
    `error` when an engine failed the case (no numbers: zero steps), `diverged` when a
    baseline engine ran the case at temperature 0 and its completion differs from the
    speculating engine's (speculation must not change greedy output), else `ok`.
    `per_case` False (acceptance from the engine's counters): drafts and
    accepted_per_position are None in every row, failed or not."""
    out = []
    for i, ((case, _prompt), run) in enumerate(zip(cases, spec, strict=True)):
        outcome = "ok"
        greedy = case_temperature(case, temperature) == 0.0
        base = baseline[i] if baseline is not None else None
        histogram = run.histogram or []
        if case_failure(run, base) is not None:
            outcome, histogram = "error", [0] * (k + 1)
        elif base is not None and greedy and base.completion != run.completion:
            outcome = "diverged"
        out.append(
            {
                "case_key": case["case_key"],
                "outcome": outcome,
                "completion_tokens": 0 if outcome == "error" else run.completion_tokens,
                "drafts": sum(histogram) if per_case else None,
                "accepted_per_position": (
                    [sum(histogram[j:]) for j in range(1, len(histogram))] if per_case else None
                ),
            }
        )
    return out


def evaluation_body(
    version: dict[str, Any],
    eval_set: dict[str, Any],
    cases: list[tuple[dict[str, Any], Any]],
    overall: Tally,
    slices: dict[str, Tally],
    *,
    depths: list[int],
    cost_ratio: float,
    perplexity: float | None,
    training_set: str | None,
    engine_version: str,
    results: list[dict[str, Any]] | None = None,
    acceptance_source: str = PER_REQUEST,
) -> dict[str, Any]:
    """The POST /evaluations body; `cases` every case run, the engine's failures
    included; `overall` and `slices` over the measured ones (no slices from the
    engine's counters); `results` the per-case rows (`case_results`)."""
    mean_length = overall.mean_acceptance_length()
    if mean_length is None:
        raise EvaluationError("no speculation steps were measured (empty outputs?)")
    return {
        "pair_version_id": version["id"],
        "eval_set_id": eval_set["id"],
        "case_keys": [case["case_key"] for case, _ in cases],
        "drafts": overall.steps,
        "position_acceptance": overall.conditional_rates(),
        "mean_acceptance_length": mean_length,
        "cost_ratio": cost_ratio,
        "expected_speedup": expected_speedups(overall, depths, cost_ratio),
        "draft_perplexity": perplexity,
        "slices": {
            name: {
                "cases": t.cases,
                "drafts": t.steps,
                "mean_acceptance_length": t.mean_acceptance_length(),
                "acceptance_rate": t.acceptance_rate(),
            }
            for name, t in sorted(slices.items())
        },
        "training_set": training_set,
        "engine_version": engine_version,
        "acceptance_source": acceptance_source,
        "case_results": results or [],
    }


def dumps(body: dict[str, Any]) -> str:
    return json.dumps(body, indent=2, sort_keys=True)
