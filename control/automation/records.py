"""The automation's decision records: the shared ADR format (control.decisions.record),
filled from the same `Evidence` and `Verdict` the decision row stores, so the record
can never disagree with the data. Every automated flip gets one.
"""

from dataclasses import dataclass
from datetime import datetime

from control.automation.evidence import Evidence
from control.automation.verdicts import Action, GuardReason, HoldReason, PoolHealth, Verdict
from control.decisions.record import RecordContent, facts, render, stage_change
from control.models import Decision, Rollout, ThresholdSet


@dataclass(frozen=True)
class RecordContext:
    rollout: Rollout
    thresholds: ThresholdSet
    decision: Decision
    decided_at: datetime


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def _evidence_lines(evidence: Evidence | None, health: PoolHealth | None) -> list[str]:
    lines: list[str] = []
    if evidence is not None:
        lines.append(
            f"- Windows since the exposure began ({evidence.exposed_since.isoformat()}) until "
            f"{evidence.until.isoformat()}: spec {len(evidence.spec.window_ids)} windows / "
            f"{evidence.spec.requests} requests (mean load {_fmt(evidence.spec.mean_load, '.1f')}"
            f"), baseline {len(evidence.baseline.window_ids)} windows / "
            f"{evidence.baseline.requests} requests (mean load "
            f"{_fmt(evidence.baseline.mean_load, '.1f')})."
        )
        b = evidence.budget
        lines.append(
            f"- False-alarm budget {b.false_alarm_rate:g} over {b.horizon_windows} windows, "
            f"{b.per_family:g} per family; spent so far: "
            + ", ".join(f"{k} {v:.2g}" for k, v in b.spent.items())
            + "."
        )
        if evidence.acceptance is not None:
            a = evidence.acceptance
            lines.append(
                f"- Acceptance α = {_fmt(a.alpha)} per judged position, mean acceptance length "
                f"{_fmt(a.mean_acceptance_length)}, {a.drafts} drafts."
            )
        m = evidence.acceptance_monitor
        if m is not None:
            lines.append(
                f"- Acceptance monitor {m.decision.value}: {m.requests} requests, design effect "
                f"{m.design_effect:.2f} ({m.effective_positions:.0f} effective positions), "
                f"H1 rate <= {m.unacceptable_rate:.2f} vs H0 >= {m.acceptable_rate:.2f}; CUSUM "
                f"peak {m.cusum_peak:.2f} (reject at {m.reject_threshold:.2f}), cumulative LLR "
                f"{m.cumulative_llr:.2f} (accept at {m.accept_boundary:.2f})."
            )
        if evidence.latency_guard is not None:
            c = evidence.latency_guard.cusum
            lines.append(
                f"- Latency monitor (end-to-end time per token, matched load, margin "
                f"{evidence.latency_guard.margin:.0%}): CUSUM peak {c.peak:.2f}, threshold "
                f"{c.threshold:.2f}, {c.blocks} blocks."
            )
        if evidence.error_guard is not None:
            e = evidence.error_guard
            lines.append(
                f"- Error monitor: spec {_fmt(e.spec_rate, '.3%')} vs baseline "
                f"{_fmt(e.baseline_rate, '.3%')}, margin {e.margin:.2%}; CUSUM peak "
                f"{e.cusum.peak:.2f}, threshold {e.cusum.threshold:.2f}."
            )
        oc = evidence.output_contract
        if oc is not None:
            lines.append(
                f"- Output contract: {oc.equal} of {oc.pairs} greedy pairs equal (equal share "
                f"{_fmt(oc.equal_share, '.2%')}, {oc.incomplete} incomplete, allowed mismatch "
                f"{oc.test.allowed_rate:.2%}); evidence ln {oc.test.log_evidence:.2f} (alarm at "
                f"{oc.test.threshold:.2f}); unequal request ids: "
                f"{', '.join(oc.mismatched_ids) or 'none'}."
            )
            higher, lower = oc.sampled_higher_test, oc.sampled_lower_test
            if higher.trials + oc.sampled_ties:
                lines.append(
                    f"- Output contract at T > 0: the spec arm's completion likelier in "
                    f"{oc.sampled_spec_higher} and less likely in {oc.sampled_spec_lower} of "
                    f"{higher.trials} sampled pairs (share "
                    f"{_fmt(oc.sampled_higher_share, '.2%')}, lossless 50%; {oc.sampled_ties} "
                    f"ties); evidence ln {higher.log_evidence:.2f} (higher) and "
                    f"{lower.log_evidence:.2f} (lower), alarm at {higher.threshold:.2f}."
                )
        for cmp in evidence.stage.values():
            lines.append(
                f"- This stage, {cmp.metric} at matched load: speedup {cmp.speedup:.3f} "
                f"(always-valid interval {cmp.lower:.3f}–{cmp.upper:.3f}), "
                f"{cmp.spec_requests} spec / {cmp.baseline_requests} baseline requests."
            )
        ns = evidence.next_stage
        if ns is not None:
            at_next = (
                f"speedup {ns.speedup.speedup:.3f} (lower bound {ns.speedup.lower:.3f}) over "
                f"{ns.speedup.spec_requests} spec requests"
                if ns.speedup is not None
                else "no matched evidence"
            )
            lines.append(
                f"- {ns.target[:1].upper()}{ns.target[1:]} {ns.share_next:g} %: projected "
                f"{ns.spec_load_next:.1f} requests per spec worker from {ns.spec_load_now:.1f} at "
                f"{ns.share_now:g} % ({ns.spec_workers} workers, {ns.segment_rate_per_s:.1f} "
                f"req/s in the segment); at load >= {ns.load_floor}: {at_next}."
            )
        lines.extend(f"- Missing: {m}." for m in evidence.missing)
    if health is not None:
        lines.append(
            f"- Spec pool: {health.healthy_workers}/{health.workers} workers healthy, "
            f"{health.pressured_workers} under sustained memory pressure (max KV usage "
            f"{health.max_kv_cache_usage:.0%}), draft available: {health.draft_available}."
        )
    return lines or ["- No telemetry in the evaluated windows."]


_ASSUMPTIONS = [
    "- Requests are independent; draft positions within a request are not (the "
    "acceptance statistics divide by the measured design effect).",
    "- Spec and baseline arms see the same request mix (sticky hash cohorts of one "
    "segment; requests forced to an arm are not evidence), and latency is compared "
    "only within the same load bucket.",
]


def _thresholds_line(t: ThresholdSet) -> str:
    return (
        f"- Thresholds: min acceptance {t.min_acceptance_rate:g} (+{t.acceptance_indifference:g} "
        f"indifference), min speedup {t.min_speedup:g}, latency margin {t.latency_margin:g}, "
        f"error margin {t.error_rate_margin:g}, false-alarm rate {t.false_alarm_rate:g} over "
        f"{t.false_alarm_horizon_windows} windows, holdout {t.holdout_percentage:g} %, max KV "
        f"usage {t.max_kv_cache_usage:g}, no benefit -> {t.no_benefit_action}."
    )


def _policy(verdict: Verdict, r: Rollout, t: ThresholdSet, to_state: str, pct: float) -> str:
    if verdict.action is Action.PROMOTE:
        if to_state == "full":
            return (
                f"The segment goes to the spec pool (pair version {r.pair_version_id}) but for "
                f"a {t.holdout_percentage:g} % baseline holdout that keeps the monitors judging; "
                f"baseline pool {r.baseline_pool_id} stays as the fallback."
            )
        return f"{pct:g} % of the segment's cohorts go to the spec arm (sticky: nobody leaves it)."
    if verdict.action is Action.ENABLE:
        return f"{pct:g} % of the segment's cohorts go to the spec arm again, on probation."
    if verdict.action is Action.START and to_state == "shadow":
        return (
            f"The shadow starts: {pct:g} % of the segment's requests are mirrored to the spec "
            "pool, responses discarded; every caller is served by the baseline arm."
        )
    if verdict.action is Action.START:
        return (
            f"The canary starts: {pct:g} % of the segment's cohorts go to the spec arm; the "
            "mirroring stops."
        )
    return (
        f"The segment's traffic goes to the baseline pool {r.baseline_pool_id}; the spec arm "
        "gets none."
    )


def _alternatives(verdict: Verdict) -> list[str]:
    if verdict.action is Action.PROMOTE:
        return [
            "- Hold at the current stage: forgoes a speedup the evidence supports at the "
            "next stage's load.",
            "- Roll back: nothing in the evidence indicates a regression.",
        ]
    if verdict.action is Action.ENABLE:
        return ["- Stay disabled: the cause has cleared and the cool-down has passed."]
    if verdict.action is Action.START:
        return [
            "- Keep shadowing: the exit criterion holds; more mirrored traffic would not "
            "change the answer.",
            "- Roll back: nothing in the evidence indicates a regression.",
        ]
    if verdict.action is Action.PAUSE:
        return [
            "- Keep holding: more evaluations of the same kind would not change the answer.",
            "- Roll back: nothing in the evidence says the spec arm does harm.",
        ]
    if verdict.code == HoldReason.NO_BENEFIT:
        return [
            "- Keep serving the spec arm: it is conclusively not min_speedup faster at this "
            "stage's load, and later stages only add load.",
            "- Pause instead (the threshold set's no_benefit_action = pause): leaves the "
            "rollout to an admin.",
        ]
    return [
        "- Keep serving the spec arm: the evidence says it is worse or unsafe.",
        "- Roll back (final, an admin restarts it) or disable (probation re-tests it): "
        "canary and ramping roll back, full and probation disable.",
        "- Pause: stops automation but leaves traffic exposed to the failing arm.",
    ]


def _reversal(verdict: Verdict, t: ThresholdSet) -> str:
    if verdict.action in (Action.PROMOTE, Action.ENABLE, Action.START):
        return (
            "The monitors keep watching: low acceptance, a latency or error regression "
            "beyond its margin, memory pressure, a saturating pool or an unavailable draft "
            "roll the rollout back (canary, ramping) or disable it (full, probation)."
        )
    if verdict.action is Action.DISABLE:
        return (
            f"Probation re-exposes {t.probation_percentage:g} % of the segment after "
            f"{t.cooldown_seconds} s × 2^(disables - 1), once the cause has cleared; an admin "
            "may enable it earlier."
        )
    if verdict.action is Action.PAUSE:
        return "An admin resumes (or rolls back) the rollout."
    return "An admin starts the rollout again (a fresh canary) once the cause is fixed."


def _risks(verdict: Verdict, to_state: str) -> list[str]:
    if verdict.action is Action.START and to_state == "shadow":
        return [
            "- The offline eval set may not match live traffic; the shadow measures the "
            "segment's own requests with no user exposed."
        ]
    if verdict.action is Action.START:
        return [
            "- Mirrored requests ran with no user waiting on them; the canary's users may "
            "cancel or stream differently. The canary's own monitors re-test from its start.",
            "- The canary's first-stage load is a projection (Little's law from the shadow's "
            "request rate and the mirrors' latency).",
        ]
    if verdict.action is Action.PROMOTE:
        return [
            "- The traffic mix can shift (new prompts, longer outputs) and move acceptance; "
            "the monitors re-test it continuously.",
            "- The next stage's load is a projection (Little's law from this stage's rate "
            "and latency).",
        ]
    risks = [
        "- The cause may be transient (a burst of unusual prompts, a restart); the spec "
        "arm's gains are forgone meanwhile."
    ]
    if verdict.code == GuardReason.DRAFT_UNAVAILABLE:
        risks.append("- The draft outage's root cause (crash, OOM, bad artifact) is unknown.")
    return risks


def render_record(
    ctx: RecordContext,
    verdict: Verdict,
    evidence: Evidence | None,
    health: PoolHealth | None = None,
) -> str:
    r, t, d = ctx.rollout, ctx.thresholds, ctx.decision
    advice = [f"- Advice: {verdict.advice}."] if verdict.advice else []
    content = RecordContent(
        title=f"{verdict.action.value.capitalize()} rollout {r.name}: {d.from_state} "
        f"{d.from_percentage:g} % → {d.to_state} {d.to_percentage:g} %",
        facts=facts(r, d),
        context=f"{verdict.reason}.",
        alternatives=_alternatives(verdict),
        evidence=_evidence_lines(evidence, health) + advice,
        assumptions=[*_ASSUMPTIONS, _thresholds_line(t)],
        policy=_policy(verdict, r, t, d.to_state, d.to_percentage),
        rollout=stage_change(d, r),
        reversal=_reversal(verdict, t),
        risks=_risks(verdict, d.to_state),
    )
    return render(content)
