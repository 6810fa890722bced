"""Decision records: one Markdown format (an ADR) for every flip, by an admin or automation.

Sections, always in this order: Context, Alternatives considered, Evidence,
Assumptions, Selected policy, Rollout, Reversal trigger, Unresolved risk. The
automation fills them from the evidence its rule saw (`control.automation.records`);
an admin's flip gets the same sections from the action, its reason and whatever
evidence it carried. Every flip gets one.
"""

from dataclasses import dataclass
from typing import Any

from control.models import Decision, Rollout

SECTIONS = (
    "Context",
    "Alternatives considered",
    "Evidence",
    "Assumptions",
    "Selected policy",
    "Rollout",
    "Reversal trigger",
    "Unresolved risk",
)


@dataclass(frozen=True)
class RecordContent:
    title: str
    facts: list[str]  # the bullet lines under the title
    context: str
    alternatives: list[str]
    evidence: list[str]
    assumptions: list[str]
    policy: str
    rollout: str
    reversal: str
    risks: list[str]


def render(content: RecordContent) -> str:
    bodies = (
        [content.context],
        content.alternatives or ["- None considered."],
        content.evidence or ["- None attached."],
        content.assumptions or ["- None stated."],
        [content.policy],
        [content.rollout],
        [content.reversal],
        content.risks or ["- None known."],
    )
    lines = [f"# {content.title}", "", *content.facts, ""]
    for section, body in zip(SECTIONS, bodies, strict=True):
        lines += [f"## {section}", "", *body, ""]
    return "\n".join(lines)


def stage_change(decision: Decision, rollout: Rollout) -> str:
    return (
        f"{decision.from_state} at {decision.from_percentage:g} % → {decision.to_state} at "
        f"{decision.to_percentage:g} % (stages {', '.join(f'{s:g}' for s in rollout.stages)} %; "
        f"rollout version {decision.rollout_version})."
    )


def facts(rollout: Rollout, decision: Decision) -> list[str]:
    by = decision.actor + (f" (task {decision.task_id})" if decision.task_id else "")
    return [
        f"- Decision {decision.id}: {decision.kind}",
        f"- Rollout: {rollout.name} (id {rollout.id}), segment {rollout.segment_id}, "
        f"pair version {rollout.pair_version_id}, spec pool {rollout.spec_pool_id}, "
        f"baseline pool {rollout.baseline_pool_id}",
        f"- Decided at {decision.created_at.isoformat()} by {by}",
        f"- Threshold set id {decision.threshold_set_id}",
    ]


_MANUAL_POLICY = {
    "offline": "No traffic: the rollout waits for an offline evaluation that meets the "
    "threshold set's offline criteria.",
    "shadow": "No exposure: the shadow share of the segment's requests is mirrored to the spec "
    "pool and its responses are discarded; callers are served by the baseline arm.",
    "canary": "A canary: the first stage's share of the segment's cohorts goes to the spec arm.",
    "ramping": "The next stage's share of the segment's cohorts goes to the spec arm.",
    "full": "The segment goes to the spec arm, but for the threshold set's baseline holdout.",
    "paused": "The spec arm gets no traffic; automation leaves the rollout to an admin.",
    "disabled": "The spec arm gets no traffic; probation re-tests it after its cool-down "
    "only when automation disabled it.",
    "probation": "The probation share of the segment's cohorts goes to the spec arm.",
    "rolled_back": "The spec arm gets no traffic until an admin starts the rollout again.",
}


def manual_content(rollout: Rollout, decision: Decision, reason: str | None) -> RecordContent:
    """An admin's flip: the action, its reason and any evidence it carried."""
    evidence: dict[str, Any] = decision.evidence or {}
    return RecordContent(
        title=f"{decision.kind.replace('_', ' ').capitalize()}: rollout {rollout.name} → "
        f"{decision.to_state}",
        facts=facts(rollout, decision),
        context=f"{reason or 'No reason given'}.",
        alternatives=["- Not recorded: an admin's action."],
        evidence=[f"- `{key}`: {value}" for key, value in sorted(evidence.items())]
        or ["- None attached (manual action)."],
        assumptions=["- The admin's judgement; the automation's monitors keep running."],
        policy=_MANUAL_POLICY.get(decision.to_state, decision.to_state),
        rollout=stage_change(decision, rollout),
        reversal="Any admin action allowed from the new state; the automation's monitors "
        "roll back or disable an exposed rollout that regresses.",
        risks=[
            f"- Waived by the admin, not evidenced: {waived}."
            for waived in evidence.get("waived", [])
        ],
    )


def render_manual(rollout: Rollout, decision: Decision, reason: str | None) -> str:
    return render(manual_content(rollout, decision, reason))
