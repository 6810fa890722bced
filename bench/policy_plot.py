"""The policy benchmark's bar chart: per segment and for the fleet, the end-to-end
time per output token of each configuration over one window of the schedule."""

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # NOTE: no display on a server; must precede pyplot.
import matplotlib.pyplot as plt

from bench.policy import CONFIGS, fleet_stats, segment_stats
from demo.report import save
from demo.traffic import RequestResult

COLORS = ("tab:orange", "tab:blue", "tab:green", "tab:grey")


def plot_segments(
    phases: Mapping[str, Sequence[RequestResult]],
    segments: Sequence[str],
    start_s: float,
    end_s: float,
    path: Path,
) -> Path:
    panels = [*segments, "fleet"]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.8), squeeze=False)
    for ax, panel in zip(axes[0], panels, strict=True):
        values: list[float] = []
        for name in CONFIGS:
            if panel == "fleet":
                value = fleet_stats(phases[name], start_s, end_s).ms_per_token
            else:
                value = segment_stats(phases[name], panel, start_s, end_s).e2e_per_token_mean_ms
            values.append(value if value is not None else 0.0)
        bars = ax.bar(range(len(CONFIGS)), values, color=COLORS)
        ax.bar_label(bars, fmt="%.0f", fontsize=8)
        ax.set_xticks(range(len(CONFIGS)), [c.replace(" ", "\n") for c in CONFIGS], fontsize=8)
        ax.set_title(panel, fontsize=10)
    axes[0, 0].set_ylabel("e2e ms per output token (lower is better)")
    fig.suptitle(
        f"arrivals in [{start_s:.0f}, {end_s:.0f}) s of every phase's schedule", fontsize=10
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    return save(fig, path)
