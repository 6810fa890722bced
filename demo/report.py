"""The demo's end: a table per segment, PNG plots, and the decision records as files.

TPOT here is what the client measured per request (streaming), split by the arm
the gateway named in its decision header; the decisions' own evidence (the
control plane's bootstrap of the gateway's telemetry histograms) is quoted in
each decision's reason and record.
"""

import csv
import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # NOTE: no display on a server; must precede pyplot.
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from rich.table import Table

from demo.monitor import DecisionEvent, Monitor, mean_acceptance_length
from demo.traffic import RequestResult

FLIP_KINDS_SKIPPED = ("hold",)  # a hold keeps the state; shown in the log, not as a change
ARM_COLORS = {"spec": "tab:blue", "baseline": "tab:orange"}


@dataclass(frozen=True)
class SegmentSummary:
    segment: str
    requests: int
    ok: int
    shed: int
    spec_requests: int
    baseline_requests: int
    mean_acceptance_length: float | None
    tpot_spec_ms: float | None  # median over the arm's requests
    tpot_baseline_ms: float | None
    state: str
    percentage: float
    decision: str  # the last state change, e.g. "canary -> full (canary_promote)"
    reason: str


def _median_ms(values: Sequence[float]) -> float | None:
    return statistics.median(values) * 1000.0 if values else None


def state_changes(decisions: Sequence[DecisionEvent], segment: str) -> list[DecisionEvent]:
    return [
        d
        for d in decisions
        if d.segment == segment
        and d.from_state != d.to_state
        and not any(k in d.kind for k in FLIP_KINDS_SKIPPED)
    ]


def summarize(
    segments: Sequence[str],
    results: Sequence[RequestResult],
    shed: dict[str, int],
    monitor: Monitor,
) -> list[SegmentSummary]:
    out: list[SegmentSummary] = []
    for seg in segments:
        rows = [r for r in results if r.segment == seg]
        ok = [r for r in rows if r.ok]
        tpot = {
            arm: [r.tpot_s for r in ok if r.arm == arm and r.tpot_s is not None]
            for arm in ("spec", "baseline")
        }
        drafts, accepted = monitor.totals(seg)
        view = monitor.rollouts.get(seg)
        automated = [d for d in state_changes(monitor.decisions, seg) if d.actor == "automation"]
        last = automated[-1] if automated else None
        out.append(
            SegmentSummary(
                segment=seg,
                requests=len(rows),
                ok=len(ok),
                shed=shed.get(seg, 0),
                spec_requests=sum(1 for r in ok if r.arm == "spec"),
                baseline_requests=sum(1 for r in ok if r.arm == "baseline"),
                mean_acceptance_length=mean_acceptance_length(drafts, accepted),
                tpot_spec_ms=_median_ms(tpot["spec"]),
                tpot_baseline_ms=_median_ms(tpot["baseline"]),
                state=view.state if view else "?",
                percentage=view.percentage if view else 0.0,
                decision=(
                    f"{last.from_state} → {last.to_state} ({last.kind})" if last else "none yet"
                ),
                reason=_with_speedup(last) if last else _pending_reason(monitor, seg),
            )
        )
    return out


def _with_speedup(d: DecisionEvent) -> str:
    """The reason, plus the measured TPOT speedup it rested on unless it names it already."""
    return d.reason if "speedup" in d.reason.lower() else d.reason + _speedup_note(d)


def _speedup_note(d: DecisionEvent) -> str:
    """The measured TPOT speedup (control's bootstrap CI over the gateway's histograms)."""
    stats = d.evidence.get("statistics") or {}
    speedup = (stats.get("tpot") or {}).get("speedup") or {}
    try:
        return (
            f"; TPOT speedup {speedup['speedup']:.2f}× "
            f"(95% CI {speedup['lower']:.2f}–{speedup['upper']:.2f})"
        )
    except (KeyError, TypeError, ValueError):
        return ""


def _pending_reason(monitor: Monitor, segment: str) -> str:
    holds = [d for d in monitor.decisions if d.segment == segment and "hold" in d.kind]
    return f"last evaluation: {holds[-1].reason}" if holds else "not enough evidence yet"


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def summary_table(summaries: Sequence[SegmentSummary]) -> Table:
    table = Table(title="specroute demo: per-segment outcome", show_lines=True)
    for header in (
        "segment",
        "requests ok/sent (shed)",
        "spec/base",
        "mean accept. len",
        "TPOT spec ms",
        "TPOT base ms",
        "state",
        "decision",
        "reason",
    ):
        table.add_column(header, overflow="fold")
    for s in summaries:
        table.add_row(
            s.segment,
            f"{s.ok}/{s.requests} ({s.shed})",
            f"{s.spec_requests}/{s.baseline_requests}",
            _fmt(s.mean_acceptance_length),
            _fmt(s.tpot_spec_ms, ".1f"),
            _fmt(s.tpot_baseline_ms, ".1f"),
            f"{s.state} {s.percentage:g}%",
            s.decision,
            s.reason,
        )
    return table


def _mark_changes(ax: Axes, changes: Sequence[DecisionEvent]) -> None:
    for i, d in enumerate(changes):
        label = "rollout state change" if i == 0 else None
        ax.axvline(d.t_s, color="tab:red", linestyle="--", linewidth=1, label=label)
        ax.annotate(
            f"{d.to_state} {d.to_percentage:g}%",
            xy=(d.t_s, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            ha="right",
            fontsize=8,
            color="tab:red",
        )


def acceptance_series(
    monitor: Monitor, segment: str, bin_s: float
) -> tuple[list[float], list[float]]:
    """Mean acceptance length per interval of at least `bin_s` seconds (counter deltas)."""
    points = [p for p in monitor.acceptance if p.segment == segment]
    xs: list[float] = []
    ys: list[float] = []
    if not points:
        return xs, ys
    prev = points[0]
    for point in points[1:]:
        if point.t_s - prev.t_s < bin_s:
            continue
        tau = mean_acceptance_length(point.drafts - prev.drafts, point.accepted - prev.accepted)
        if tau is not None:
            xs.append((point.t_s + prev.t_s) / 2)
            ys.append(tau)
        prev = point
    return xs, ys


def save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_acceptance(
    monitor: Monitor, segments: Sequence[str], path: Path, bin_s: float = 15.0, k: int = 3
) -> Path:
    return save(acceptance_figure(monitor, segments, bin_s, k), path)


def acceptance_figure(
    monitor: Monitor, segments: Sequence[str], bin_s: float = 15.0, k: int = 3
) -> Figure:
    fig, axes = plt.subplots(
        len(segments), 1, figsize=(11, 2.8 * len(segments)), squeeze=False, sharex=True
    )
    for ax, seg in zip(axes[:, 0], segments, strict=True):
        xs, ys = acceptance_series(monitor, seg, bin_s)
        ax.plot(xs, ys, marker="o", color=ARM_COLORS["spec"], label="spec arm")
        ax.axhline(
            1.0, color=ARM_COLORS["baseline"], linewidth=1.5, label="baseline arm (1 token / pass)"
        )
        ax.axhline(
            k + 1, color="grey", linestyle=":", linewidth=1, label=f"ceiling k + 1 = {k + 1}"
        )
        ax.set_title(f"{seg}: mean acceptance length per {bin_s:g} s (gateway counters)")
        ax.set_ylabel("tokens / target pass")
        # tau lies in [1, k + 1]; a fixed scale makes segments comparable at a glance.
        ax.set_ylim(0.9, max([k + 1.2, *ys]))
        _mark_changes(ax, state_changes(monitor.decisions, seg))
        _legend_outside(ax)
    axes[-1, 0].set_xlabel("seconds since traffic started")
    fig.tight_layout()
    return fig


def plot_tpot(
    results: Sequence[RequestResult],
    monitor: Monitor,
    segments: Sequence[str],
    path: Path,
) -> Path:
    return save(tpot_figure(results, monitor, segments), path)


def tpot_figure(
    results: Sequence[RequestResult], monitor: Monitor, segments: Sequence[str]
) -> Figure:
    fig, axes = plt.subplots(
        len(segments), 1, figsize=(11, 2.8 * len(segments)), squeeze=False, sharex=True
    )
    for ax, seg in zip(axes[:, 0], segments, strict=True):
        every: list[float] = []
        for arm, color in ARM_COLORS.items():
            rows = sorted(
                (r for r in results if r.segment == seg and r.arm == arm and r.tpot_s is not None),
                key=lambda r: r.started_s,
            )
            xs = [r.started_s for r in rows]
            ys = [r.tpot_s * 1000.0 for r in rows if r.tpot_s is not None]
            every += ys
            ax.scatter(xs, ys, s=10, alpha=0.45, color=color)
            ax.plot(xs, _rolling_median(ys, 7), color=color, label=f"{arm} (rolling median)")
        title = f"{seg}: time per output token by arm (client-measured)"
        top = clip_limit(every)
        if top is not None:
            above = sum(1 for y in every if y > top)
            ax.set_ylim(0, top)
            title += f"; y clipped at p{CLIP_PERCENTILE:g} = {top:.0f} ms ({above} above)"
        else:
            ax.set_ylim(bottom=0)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("TPOT ms")
        _mark_changes(ax, state_changes(monitor.decisions, seg))
        _legend_outside(ax)
    axes[-1, 0].set_xlabel("seconds since traffic started")
    fig.tight_layout()
    return fig


CLIP_PERCENTILE = 98.0


def clip_limit(values: Sequence[float]) -> float | None:
    """The y limit that keeps single outliers from flattening the medians: the
    CLIP_PERCENTILE-th percentile with 10 % headroom, or None when nothing sticks out."""
    if len(values) < 20:
        return None
    ordered = sorted(values)
    at = ordered[min(len(ordered) - 1, int(len(ordered) * CLIP_PERCENTILE / 100.0))]
    limit = at * 1.1
    return limit if ordered[-1] > limit else None


def _legend_outside(ax: Axes) -> None:
    """Right of the panel, so it never hides points or the state-change labels."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0.0)


def _rolling_median(values: Sequence[float], window: int) -> list[float]:
    return [statistics.median(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))]


def write_tables(
    report_dir: Path,
    results: Sequence[RequestResult],
    summaries: Sequence[SegmentSummary],
    monitor: Monitor,
    machine: dict[str, object] | None = None,
) -> list[Path]:
    report_dir.mkdir(parents=True, exist_ok=True)
    requests_csv = report_dir / "requests.csv"
    with requests_csv.open("w", newline="") as f:
        fields = list(RequestResult.__dataclass_fields__)
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in results:
            writer.writerow(asdict(r))
    summary_json = report_dir / "summary.json"
    summary_json.write_text(
        json.dumps(
            {
                "segments": [asdict(s) for s in summaries],
                "decisions": [asdict(d) for d in monitor.decisions],
                # The cumulative gateway counters the acceptance plot was drawn from.
                "acceptance_samples": [asdict(p) for p in monitor.acceptance],
                # Load average at start and end: on a busy machine the verdicts differ.
                "machine": machine or {},
            },
            indent=2,
            default=str,
        )
    )
    return [requests_csv, summary_json]
