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
            f"- Windows {evidence.since.isoformat()} → {evidence.until.isoformat()}: "
            f"spec {len(evidence.spec.window_ids)} windows / {evidence.spec.requests} requests, "
            f"baseline {len(evidence.baseline.window_ids)} windows / "
            f"{evidence.baseline.requests} requests."
        )
        if evidence.acceptance is not None:
            a = evidence.acceptance
            lines.append(
                f"- Acceptance α = {_fmt(a.alpha)} "
                f"(CI {_fmt(a.alpha_lower)}–{_fmt(a.alpha_upper)}, {a.alpha_method}), "
                f"mean acceptance length {_fmt(a.mean_acceptance_length)}, "
                f"{a.drafts} drafts."
            )
        if evidence.sprt is not None:
            s = evidence.sprt
            lines.append(
                f"- SPRT {s.decision.value}: LLR {s.llr:.2f} in [{s.lower_boundary:.2f}, "
                f"{s.upper_boundary:.2f}], {s.successes}/{s.trials} positions accepted, "
                f"p0 = {s.acceptable_rate:.2f}, p1 = {s.unacceptable_rate:.2f}."
            )
        for cmp in (evidence.tpot, evidence.e2e):
            if cmp is not None:
                sp = cmp.speedup
                lines.append(
                    f"- {cmp.metric.upper()} speedup {sp.speedup:.3f} "
                    f"({sp.confidence:.0%} CI {sp.lower:.3f}–{sp.upper:.3f}), medians "
                    f"{sp.median_spec_ms:.2f} ms spec vs {sp.median_baseline_ms:.2f} ms "
                    f"baseline; Mann-Whitney p = {cmp.mann_whitney.p_value:.3g}."
                )
        if evidence.error_rate is not None:
            e = evidence.error_rate
            lines.append(
                f"- Error rate {e.spec_rate:.3%} spec vs {e.baseline_rate:.3%} baseline "
                f"({e.method}, p = {e.p_value:.3g})."
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
            "Guards keep watching: the rollout is disabled automatically on sustained low "
            "acceptance (SPRT reject), memory pressure, an unavailable draft, or a TPOT "
            "speedup whose CI upper bound drops below 1."
        )
        risks = [
            "- Traffic mix shifts after full exposure (new prompts, longer outputs) can move "
            "acceptance; the guards re-test it continuously.",
            "- The baseline arm shrinks to nothing at full, so later latency comparisons "
            "rely on the last stage's baseline.",
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
        "- Requests are independent; acceptance per judged draft position is a Bernoulli "
        "trial (positive correlation within a request widens the real variance).",
        "- Spec and baseline arms see the same request mix (sticky hash cohorts of one "
        "segment), so their latency histograms are comparable.",
        f"- Thresholds: min acceptance {t.min_acceptance_rate:g}, min speedup "
        f"{t.min_speedup:g}, min samples {t.min_samples}, max KV usage "
        f"{t.max_kv_cache_usage:g}, SPRT α {t.sprt_alpha:g} / β {t.sprt_beta:g}.",
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
