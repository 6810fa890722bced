"""Decision records as files under the data dir.

The control plane renders a Markdown record (ADR) for promotions to full and for
disables; those are written out verbatim. An automated state change it keeps no
record for (a canary rollback, a pause) still deserves one in the demo's output,
so the demo renders a short one from the decision row's stored evidence: the
same numbers the rule saw, never recomputed.
"""

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from bench.demo_monitor import DecisionEvent


def _fmt(value: Any, spec: str = ".3f") -> str:
    return format(value, spec) if isinstance(value, int | float) else "n/a"


def render_from_evidence(d: DecisionEvent) -> str:
    """A record for a decision the control plane kept no Markdown for."""
    stats: dict[str, Any] = d.evidence.get("statistics") or {}
    thresholds: dict[str, Any] = d.evidence.get("threshold_set") or {}
    lines = [
        f"# {d.kind.replace('_', ' ').capitalize()}: {d.segment} {d.from_state} → {d.to_state}",
        "",
        f"- Decision {d.id} by {d.actor} (task {d.evidence.get('task_id') or 'n/a'}), "
        f"{d.t_s:.0f} s after the demo traffic started",
        f"- Change: {d.from_state} → {d.to_state} at {d.to_percentage:g} %",
        f"- Threshold set: {thresholds.get('name', 'n/a')} v{thresholds.get('version', '?')}",
        "- Rendered by `specroute demo` from the decision's stored evidence (the control "
        "plane writes records for promotions to full and disables only).",
        "",
        "## Reason",
        "",
        d.reason,
        "",
        "## Evidence",
        "",
    ]
    for arm in ("spec", "baseline"):
        summary = stats.get(arm) or {}
        lines.append(
            f"- {arm} arm: {summary.get('requests', 'n/a')} requests, "
            f"{summary.get('errors', 'n/a')} errors, {len(summary.get('window_ids', []))} windows"
        )
    acceptance = stats.get("acceptance") or {}
    if acceptance:
        lines.append(
            f"- Acceptance α = {_fmt(acceptance.get('alpha'))}, mean acceptance length "
            f"{_fmt(acceptance.get('mean_acceptance_length'))} over "
            f"{acceptance.get('drafts', 'n/a')} drafts"
        )
    monitor = stats.get("acceptance_monitor") or {}
    if monitor:
        lines.append(
            f"- Acceptance monitor {monitor.get('decision', 'n/a')}: "
            f"{monitor.get('requests', 'n/a')} requests, design effect "
            f"{_fmt(monitor.get('design_effect'), '.2f')}"
        )
    for comparison in (stats.get("stage") or {}).values():
        lines.append(
            f"- {comparison.get('metric')} at matched load: speedup "
            f"{_fmt(comparison.get('speedup'))} (always-valid interval "
            f"{_fmt(comparison.get('lower'))}–{_fmt(comparison.get('upper'))}), "
            f"{comparison.get('spec_requests', 'n/a')} spec / "
            f"{comparison.get('baseline_requests', 'n/a')} baseline requests"
        )
    for missing in stats.get("missing") or []:
        lines.append(f"- Missing: {missing}")
    return "\n".join(lines) + "\n"


async def write_records(
    records_dir: Path,
    decisions: Sequence[DecisionEvent],
    fetch: Callable[[int], Awaitable[str | None]],
) -> list[Path]:
    """One file per automated state change (and any decision with a control record)."""
    records_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for d in decisions:
        changed = d.from_state != d.to_state and d.actor == "automation"
        if not (d.has_record or changed):
            continue
        text = await fetch(d.id) if d.has_record else None
        if text is None:
            text = render_from_evidence(d)
        path = records_dir / f"decision-{d.id}-{d.segment}-{d.to_state}.md"
        path.write_text(text)
        written.append(path)
    return written
