"""Decision records (ADR-style Markdown) for promotions to full and disables."""

from typing import Any

from control.models import Decision, Rollout

RECORDED_TO_STATES = frozenset({"full", "disabled"})


def needs_record(to_state: str) -> bool:
    return to_state in RECORDED_TO_STATES


def render_record(rollout: Rollout, decision: Decision, reason: str | None) -> str:
    evidence: dict[str, Any] = decision.evidence or {}
    lines = [
        f"# Decision {decision.id}: rollout {rollout.name} → {decision.to_state}",
        "",
        "## Status",
        f"Accepted ({decision.created_at.isoformat()}), by {decision.actor}"
        + (f", task {decision.task_id}" if decision.task_id else "")
        + ".",
        "",
        "## Context",
        f"- Segment {rollout.segment_id}, pair version {rollout.pair_version_id}, "
        f"spec pool {rollout.spec_pool_id}, baseline pool {rollout.baseline_pool_id}.",
        f"- Thresholds: set {decision.threshold_set_id}.",
        f"- From {decision.from_state} at {decision.from_percentage:g} % "
        f"to {decision.to_state} at {decision.to_percentage:g} % "
        f"(rollout version {decision.rollout_version}).",
        "",
        "## Decision",
        f"{decision.kind}: {reason or 'no reason given'}.",
        "",
        "## Evidence",
    ]
    if evidence:
        lines += [f"- `{key}`: {value}" for key, value in sorted(evidence.items())]
    else:
        lines.append("- none attached (manual action).")
    return "\n".join(lines) + "\n"
