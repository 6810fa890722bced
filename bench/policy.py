"""The policy against static choices on the same mixed open-loop traffic: the numbers.

Four configurations serve one seeded arrival schedule (demo.traffic: the same
arrival times, prompts and users in every phase):

- *all baseline* and *all speculation*: every request forced to one arm with the
  gateway's override header (static choices, no holdout, no cohorts);
- *specroute*: no header; the segments' rollouts start at canary and the
  automation promotes, pauses, disables or rolls them back on what the gateway
  measured;
- *oracle*: the best static arm per segment, chosen from this run's first two
  phases (the lower mean end-to-end time per output token), forced per segment.

This module is the arithmetic on the per-request results (demo.traffic.RequestResult)
and the automation's decisions (demo.monitor.DecisionEvent): the oracle's choice,
when the automation converged, per-segment and fleet statistics over a window of
the schedule, and the Markdown tables. bench.policy_cli runs the phases.
"""

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.break_even import percentile
from demo.monitor import DecisionEvent
from demo.report import state_changes
from demo.traffic import RequestResult

BASELINE, SPECULATION, SPECROUTE, ORACLE = "all baseline", "all speculation", "specroute", "oracle"
CONFIGS = (BASELINE, SPECULATION, SPECROUTE, ORACLE)
STATIC = (BASELINE, SPECULATION)
# The override header's value that forces each arm (gateway/routes/openai.py).
OVERRIDE_HEADER = "x-specroute-speculation"
OVERRIDE = {"spec": "on", "baseline": "off"}
# States in which the automation has made up its mind about a segment; canary and
# ramping still wait for evidence.
SETTLED_STATES = frozenset({"full", "disabled", "rolled_back", "paused"})
# The goal (issue #11 item 4): specroute within this fraction of the oracle.
ORACLE_TOLERANCE = 0.05


def override_headers(arms: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """segment -> arm ("spec" | "baseline")  =>  segment -> the header forcing that arm."""
    return {segment: {OVERRIDE_HEADER: OVERRIDE[arm]} for segment, arm in arms.items()}


def e2e_per_token_s(r: RequestResult) -> float:
    assert r.completion_tokens > 0
    return r.e2e_s / r.completion_tokens


def _served(results: Sequence[RequestResult], start_s: float, end_s: float) -> list[RequestResult]:
    """The successful requests that arrived in [start_s, end_s), with tokens."""
    return [
        r for r in results if r.ok and r.completion_tokens > 0 and start_s <= r.started_s < end_s
    ]


def mean_e2e_per_token_s(results: Sequence[RequestResult]) -> float | None:
    values = [e2e_per_token_s(r) for r in results if r.ok and r.completion_tokens > 0]
    return statistics.mean(values) if values else None


@dataclass(frozen=True)
class OracleChoice:
    segment: str
    arm: str  # "spec" | "baseline"
    baseline_ms: float | None  # mean e2e ms per output token, all-baseline phase
    spec_ms: float | None  # the same, all-speculation phase


def oracle_arms(
    segments: Sequence[str],
    baseline: Sequence[RequestResult],
    speculation: Sequence[RequestResult],
) -> list[OracleChoice]:
    """Per segment, the static arm with the lower mean end-to-end time per output token
    on the same schedule. A tie, or a segment one phase did not serve, goes to the
    baseline: speculation has to earn its draft's cost."""
    out = []
    for seg in segments:
        base = mean_e2e_per_token_s([r for r in baseline if r.segment == seg])
        spec = mean_e2e_per_token_s([r for r in speculation if r.segment == seg])
        arm = "spec" if base is not None and spec is not None and spec < base else "baseline"
        out.append(
            OracleChoice(
                seg,
                arm,
                base * 1000 if base is not None else None,
                spec * 1000 if spec is not None else None,
            )
        )
    return out


@dataclass(frozen=True)
class Convergence:
    """When the automation stopped changing rollouts, and whether it had decided."""

    last_flip_s: float | None  # since the phase's traffic started; None: no flip at all
    flips: list[DecisionEvent]
    states: dict[str, str]  # segment -> rollout state when the traffic ended

    @property
    def unsettled(self) -> dict[str, str]:
        """Segments still being judged (canary, ramping) when the traffic ended."""
        return {seg: st for seg, st in self.states.items() if st not in SETTLED_STATES}

    @property
    def converged(self) -> bool:
        return self.last_flip_s is not None and not self.unsettled

    def describe(self) -> str:
        if self.last_flip_s is None:
            return "no flip within the phase: the automation did not converge"
        text = f"last flip at {self.last_flip_s:.0f} s"
        if self.unsettled:
            waiting = ", ".join(f"{s} still {st}" for s, st in sorted(self.unsettled.items()))
            return f"{text}; not converged: {waiting}"
        return f"{text}; every segment settled"


def convergence(
    decisions: Sequence[DecisionEvent],
    segments: Sequence[str],
    duration_s: float,
    initial_state: str = "canary",
) -> Convergence:
    """The automation's last state change within the phase's traffic (holds do not
    count), and the segments whose rollout was, by those changes, still being judged
    (canary, ramping) when the traffic ended. Every rollout starts in `initial_state`."""
    flips = sorted(
        (
            d
            for seg in segments
            for d in state_changes(decisions, seg)
            if d.actor == "automation" and 0.0 <= d.t_s < duration_s
        ),
        key=lambda d: d.t_s,
    )
    states = dict.fromkeys(segments, initial_state)
    for d in flips:
        states[d.segment] = d.to_state
    return Convergence(flips[-1].t_s if flips else None, flips, states)


@dataclass(frozen=True)
class SegmentStats:
    segment: str
    ok: int
    failed: int
    spec_share: float | None
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    e2e_per_token_p50_ms: float | None
    e2e_per_token_p99_ms: float | None
    e2e_per_token_mean_ms: float | None


def segment_stats(
    results: Sequence[RequestResult], segment: str, start_s: float, end_s: float
) -> SegmentStats:
    mine = [r for r in results if r.segment == segment and start_s <= r.started_s < end_s]
    served = _served(mine, start_s, end_s)
    ttft = sorted(r.ttft_s * 1000 for r in served if r.ttft_s is not None)
    per_token = sorted(e2e_per_token_s(r) * 1000 for r in served)
    return SegmentStats(
        segment=segment,
        ok=len(served),
        failed=len(mine) - len(served),
        spec_share=sum(r.arm == "spec" for r in served) / len(served) if served else None,
        ttft_p50_ms=percentile(ttft, 50),
        ttft_p99_ms=percentile(ttft, 99),
        e2e_per_token_p50_ms=percentile(per_token, 50),
        e2e_per_token_p99_ms=percentile(per_token, 99),
        e2e_per_token_mean_ms=statistics.mean(per_token) if per_token else None,
    )


@dataclass(frozen=True)
class FleetStats:
    ok: int
    tokens: int
    tokens_per_s: float  # output tokens of the requests that arrived in the window / window
    ms_per_token: float | None  # sum of end-to-end times / sum of output tokens


def fleet_stats(results: Sequence[RequestResult], start_s: float, end_s: float) -> FleetStats:
    assert end_s > start_s
    served = _served(results, start_s, end_s)
    tokens = sum(r.completion_tokens for r in served)
    return FleetStats(
        ok=len(served),
        tokens=tokens,
        tokens_per_s=tokens / (end_s - start_s),
        ms_per_token=sum(r.e2e_s for r in served) * 1000 / tokens if tokens else None,
    )


def fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def ratio(value: float | None, reference: float | None) -> float | None:
    return value / reference if value and reference else None


def fleet_table(
    phases: Mapping[str, Sequence[RequestResult]], start_s: float, end_s: float
) -> list[str]:
    lines = [
        "| configuration | requests ok | output tokens | fleet tokens/s | fleet e2e ms/token "
        "| vs oracle (ms/token) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    stats = {name: fleet_stats(results, start_s, end_s) for name, results in phases.items()}
    oracle = stats[ORACLE].ms_per_token if ORACLE in stats else None
    for name, s in stats.items():
        lines.append(
            f"| {name} | {s.ok} | {s.tokens} | {s.tokens_per_s:.1f} | {fmt(s.ms_per_token)} "
            f"| {fmt(ratio(s.ms_per_token, oracle), '.3f')} |"
        )
    return lines


def segment_table(
    phases: Mapping[str, Sequence[RequestResult]],
    segments: Sequence[str],
    start_s: float,
    end_s: float,
) -> list[str]:
    lines = [
        "| segment | configuration | ok | failed | spec share | TTFT p50 / p99 ms "
        "| e2e ms/token p50 / p99 | e2e ms/token mean | vs oracle |",
        "|---|---|---:|---:|---:|---|---|---:|---:|",
    ]
    for seg in segments:
        stats = {
            name: segment_stats(results, seg, start_s, end_s) for name, results in phases.items()
        }
        oracle = stats[ORACLE].e2e_per_token_mean_ms if ORACLE in stats else None
        for name, s in stats.items():
            vs_oracle = ratio(s.e2e_per_token_mean_ms, oracle)
            share = f"{s.spec_share:.0%}" if s.spec_share is not None else "-"
            lines.append(
                f"| {seg} | {name} | {s.ok} | {s.failed} | {share} "
                f"| {fmt(s.ttft_p50_ms)} / {fmt(s.ttft_p99_ms)} "
                f"| {fmt(s.e2e_per_token_p50_ms)} / {fmt(s.e2e_per_token_p99_ms)} "
                f"| {fmt(s.e2e_per_token_mean_ms)} | {fmt(vs_oracle, '.3f')} |"
            )
    return lines


def goal_lines(
    phases: Mapping[str, Sequence[RequestResult]], start_s: float, end_s: float
) -> list[str]:
    """The goal, judged on the fleet's end-to-end time per output token over
    [start_s, end_s): specroute below both static configurations and within
    ORACLE_TOLERANCE of the oracle. Tokens/s is shown beside it: at an open-loop
    offered load it differs only by what a configuration shed or failed."""
    stats = {name: fleet_stats(phases[name], start_s, end_s) for name in CONFIGS}
    mine = stats[SPECROUTE]
    lines = []
    for name in (*STATIC, ORACLE):
        other = stats[name]
        if mine.ms_per_token is None or other.ms_per_token is None:
            lines.append(f"- specroute vs {name}: no requests served in the window")
            continue
        latency = mine.ms_per_token / other.ms_per_token
        if name == ORACLE:
            met = latency <= 1 + ORACLE_TOLERANCE
            goal = f"within {ORACLE_TOLERANCE:.0%} of the oracle"
        else:
            met = latency < 1.0
            goal = f"ahead of {name}"
        lines.append(
            f"- specroute vs {name}: fleet e2e ms/token {mine.ms_per_token:.1f} vs "
            f"{other.ms_per_token:.1f} ({latency:.3f}x); tokens/s {mine.tokens_per_s:.1f} vs "
            f"{other.tokens_per_s:.1f}: {goal} **{'met' if met else 'not met'}**"
        )
    return lines


def segment_goal_line(
    phases: Mapping[str, Sequence[RequestResult]],
    segments: Sequence[str],
    start_s: float,
    end_s: float,
) -> str:
    """Per segment (mean e2e ms/token), how many are within ORACLE_TOLERANCE of the
    oracle: the fleet figure weighs segments by their tokens, this one counts them."""
    ratios = {
        seg: ratio(
            segment_stats(phases[SPECROUTE], seg, start_s, end_s).e2e_per_token_mean_ms,
            segment_stats(phases[ORACLE], seg, start_s, end_s).e2e_per_token_mean_ms,
        )
        for seg in segments
    }
    close = [seg for seg, r in ratios.items() if r is not None and r <= 1 + ORACLE_TOLERANCE]
    misses = ", ".join(f"{seg} {fmt(r, '.3f')}x" for seg, r in ratios.items() if seg not in close)
    return (
        f"- per segment: specroute within {ORACLE_TOLERANCE:.0%} of the oracle in "
        f"{len(close)} of {len(segments)}" + (f" (not: {misses})" if misses else "")
    )
