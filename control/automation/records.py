"""The Markdown decision record (an ADR) written for promotions to full and disables.

Sections: context, alternatives, evidence, assumptions, selected policy, reversal
trigger, open risks. It is rendered from the same `Evidence` and `Verdict` the
decision row stores, so the record can never disagree with the data.
"""

from dataclasses import dataclass
from datetime import datetime

from control.automation.evidence import Evidence
from control.automation.verdicts import Action, GuardReason, PoolHealth, Verdict
from control.models import Rollout, ThresholdSet


@dataclass(frozen=True)
class RecordContext:
    rollout: Rollout
    thresholds: ThresholdSet
    from_state: str
    to_state: str
    from_percentage: float
    to_percentage: float
    task_id: str | None
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
                f"- Next stage {ns.share_next:g} %: projected {ns.spec_load_next:.1f} requests "
                f"per spec worker ({ns.spec_workers} workers, {ns.segment_rate_per_s:.1f} req/s "
                f"in the segment); at load >= {ns.load_floor}: {at_next}."
            )
        lines.extend(f"- Missing: {m}." for m in evidence.missing)
    if health is not None:
        lines.append(
            f"- Spec pool: {health.healthy_workers}/{health.workers} workers healthy, "
            f"{health.pressured_workers} under sustained memory pressure (max KV usage "
            f"{health.max_kv_cache_usage:.0%}), draft available: {health.draft_available}."
        )
    return lines or ["- No telemetry in the evaluated windows."]


def render_record(
    ctx: RecordContext,
    verdict: Verdict,
    evidence: Evidence | None,
    health: PoolHealth | None = None,
) -> str:
    r, t = ctx.rollout, ctx.thresholds
    title = (
        f"Promote rollout {r.name} to full"
        if verdict.action is Action.PROMOTE
        else f"{verdict.action.value.capitalize()} rollout {r.name}"
    )
    if verdict.action is Action.PROMOTE:
        alternatives = [
            "- Hold at the current stage: forgoes a measured speedup the evidence supports.",
            "- Roll back: nothing in the evidence indicates a regression.",
        ]
        policy = (
            f"All of the segment's traffic goes to the spec pool (pair version "
            f"{r.pair_version_id}); baseline pool {r.baseline_pool_id} stays as the fallback."
        )
        reversal = (
            f"Guards keep watching against a {t.holdout_percentage:g} % baseline holdout: the "
            "rollout is disabled automatically on low acceptance, a latency or error "
            "regression beyond its margin, memory pressure, a saturating pool or an "
            "unavailable draft."
        )
        risks = [
            "- Traffic mix shifts after full exposure (new prompts, longer outputs) can move "
            "acceptance; the guards re-test it continuously.",
            "- The holdout is small, so latency comparisons after full are matched only at "
            "the loads the holdout meets.",
        ]
    else:
        alternatives = [
            "- Keep serving the spec arm: the guard's evidence says it is worse or unsafe.",
            "- Roll back: final, would need an admin to restart; disable lets probation "
            "re-test automatically.",
            "- Pause: stops automation but leaves traffic exposed to the failing arm.",
        ]
        policy = (
            f"The segment's traffic goes to the baseline pool {r.baseline_pool_id}; the spec "
            "arm gets no traffic until probation re-enables it."
        )
        reversal = (
            f"Probation re-exposes {t.probation_percentage:g} % of the segment after "
            f"{t.cooldown_seconds} s × 2^(disables - 1), once the cause has cleared; an admin "
            "may enable it earlier."
        )
        risks = [
            "- The cause may be transient (a burst of unusual prompts, a restart); probation "
            "will re-test, at the cost of slower decoding meanwhile.",
        ]
        if verdict.code == GuardReason.DRAFT_UNAVAILABLE:
            risks.append("- The draft outage's root cause (crash, OOM, bad artifact) is unknown.")
    lines = [
        f"# {title}",
        "",
        f"- Rollout: {r.name} (id {r.id}), segment {r.segment_id}, "
        f"pair version {r.pair_version_id}",
        f"- Change: {ctx.from_state} {ctx.from_percentage:g} % → "
        f"{ctx.to_state} {ctx.to_percentage:g} %",
        f"- Decided at: {ctx.decided_at.isoformat()} by automation (task {ctx.task_id})",
        f"- Threshold set: {t.name} v{t.version} (id {t.id})",
        "",
        "## Context",
        "",
        f"{verdict.reason}.",
        "",
        "## Alternatives considered",
        "",
        *alternatives,
        "",
        "## Evidence",
        "",
        *_evidence_lines(evidence, health),
        "",
        "## Assumptions",
        "",
        "- Requests are independent; draft positions within a request are not (the "
        "acceptance statistics divide by the measured design effect).",
        "- Spec and baseline arms see the same request mix (sticky hash cohorts of one "
        "segment; requests forced to an arm are not evidence), and latency is compared "
        "only within the same load bucket.",
        f"- Thresholds: min acceptance {t.min_acceptance_rate:g} (+{t.acceptance_indifference:g} "
        f"indifference), min speedup {t.min_speedup:g}, latency margin {t.latency_margin:g}, "
        f"error margin {t.error_rate_margin:g}, false-alarm rate {t.false_alarm_rate:g} over "
        f"{t.false_alarm_horizon_windows} windows, holdout {t.holdout_percentage:g} %, max KV "
        f"usage {t.max_kv_cache_usage:g}.",
        "",
        "## Selected policy",
        "",
        policy,
        "",
        "## Reversal trigger",
        "",
        reversal,
        "",
        "## Open risks",
        "",
        *risks,
        "",
    ]
    return "\n".join(lines)
