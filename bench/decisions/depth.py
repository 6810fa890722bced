"""Depth by load in the decision suite: a depth ladder under load that crosses the
points where the best depth changes, through the gateway's own code.

A continuous-time discrete-event simulation, as bench/decisions/dispatch.py: requests
arrive as a Poisson process whose rate follows the scenario's offered per-worker
load; each one is decided by `gateway.decision.decide.decide` on a real
`PolicySnapshot` whose rollout carries the ladder, moved to a rung by
`gateway.routing.depth.DepthRouter` (the call `gateway.pipeline.decide_arm` makes, on
a virtual clock), and sent through the gateway's `Balancer` to a worker of that rung's
pool; its service time is drawn at the worker's load at dispatch from the rung's
latency model, and its lease is released when it completes. Each finished request's
first-position acceptance goes to `DepthRouter.observe`, as the gateway's accounting
does. The router's rung changes are read off its own hook.

What is judged: the ladder's switches against the offered load's crossings of each
bound's band (max_load +- hysteresis: a real move from one depth's region to the
other's), the time between switches against the dwell, the switches while the load
oscillates inside a band, and the share of requests served at the depth that is
best for the offered load when they arrive.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import numpy as np

from bench.decisions.scenarios import DepthScenario, LoadPhase
from control.simulation.traffic import (
    ArmModel,
    TrafficModel,
    draw_requests,
    mean_e2e_per_token_ms,
    mean_e2e_s,
)
from gateway.decision.decide import DecisionInput, decide
from gateway.decision.features import request_features
from gateway.proxy.schemas import ChatCompletionBody
from gateway.routing.balancer import Balancer, Lease
from gateway.routing.depth import DepthRouter, RungChange
from specwire import (
    DepthLadder,
    DepthRung,
    PairVersionSpec,
    PolicySnapshot,
    PoolSnapshot,
    RolloutSpec,
    RolloutState,
    SegmentSelector,
    SegmentSpec,
    TenantSpec,
    WorkerSpec,
)

SLICE_S = 0.1  # arrivals are drawn per slice of this many seconds (rate constant in it)
# The real load is judged on the per-second load averaged over this many seconds
# (centred): the one-second means swing by about 0.3 per worker at 16 workers.
JUDGE_WINDOW_S = 5
SEGMENT, ROLLOUT, BASELINE_POOL = "depth-sim", 1, 99
LADDER, ORACLE = "ladder", "oracle"  # what a run routes by, besides a single depth


def break_even(a: ArmModel, b: ArmModel, traffic: TrafficModel, hi: float = 100.0) -> float:
    """The per-worker load above which `b` (shallower) is faster per token than `a`."""

    def gap(load: float) -> float:
        return mean_e2e_per_token_ms(a, traffic, load) - mean_e2e_per_token_ms(b, traffic, load)

    lo = 0.0
    assert gap(lo) < 0 < gap(hi), "the deeper rung must win at no load and lose at high load"
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gap(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def bounds(s: DepthScenario) -> list[float]:
    """Each rung's max_load but the last's: the break-even with the next rung."""
    return [
        break_even(a, b, replace(s.traffic, k=ka))
        for (ka, a), (_, b) in zip(s.rungs, s.rungs[1:], strict=False)
    ]


def ladder(s: DepthScenario) -> DepthLadder:
    limits = bounds(s)
    return DepthLadder(
        rungs=[
            DepthRung(
                pool_id=i + 1,
                num_speculative_tokens=k,
                max_load=round(limits[i], 2) if i < len(limits) else None,
            )
            for i, (k, _) in enumerate(s.rungs)
        ],
        hysteresis=s.hysteresis,
        min_dwell_s=s.min_dwell_s,
        acceptance_reset=s.acceptance_reset,
    )


def snapshot(s: DepthScenario) -> PolicySnapshot:
    """A rollout at full (no holdout) on the rung pools, its own pool the own_k rung."""
    pairs, pools = [], []
    for i, (k, _) in enumerate(s.rungs):
        pairs.append(
            PairVersionSpec(
                id=i + 1,
                pair_name="sim",
                version=i + 1,
                label=f"sim-k{k}",
                method="draft_model",
                num_speculative_tokens=k,
                target_ref="sim-target",
                draft_ref="sim-draft",
            )
        )
        pools.append(_pool(i + 1, f"sim-k{k}", s.workers, pair_version_id=i + 1))
    pools.append(_pool(BASELINE_POOL, "sim-base", s.workers, pair_version_id=None))
    own = next(i + 1 for i, (k, _) in enumerate(s.rungs) if k == s.own_k)
    rollout = RolloutSpec(
        id=ROLLOUT,
        segment_id=1,
        pair_version_id=own,
        spec_pool_id=own,
        baseline_pool_id=BASELINE_POOL,
        state=RolloutState.FULL,
        percentage=100.0,
        holdout_percentage=0.0,
        cohort_salt="depth-sim",
        version=1,
        depth_ladder=ladder(s),
    )
    return PolicySnapshot(
        version=1,
        generated_at=datetime(2030, 1, 1, tzinfo=UTC),
        ttl_seconds=1e9,
        segments=[
            SegmentSpec(id=1, name=SEGMENT, priority=1, selector=SegmentSelector(tenants=["t"]))
        ],
        rollouts=[rollout],
        pools=pools,
        pair_versions=pairs,
        tenants=[TenantSpec(id=1, name="t", key_hashes=[])],
    )


def _pool(pool_id: int, name: str, workers: int, *, pair_version_id: int | None) -> PoolSnapshot:
    return PoolSnapshot(
        id=pool_id,
        name=name,
        served_model_name="sim",
        target_ref="sim-target",
        pair_version_id=pair_version_id,
        workers=[
            WorkerSpec(
                id=f"{name}-{w}",
                pool_id=pool_id,
                endpoint_url=f"http://127.0.0.1:9/{name}/{w}",
                healthy=True,
            )
            for w in range(workers)
        ],
    )


def offered_load(phases: tuple[LoadPhase, ...], t: float) -> float:
    """The scenario's offered per-worker load at second t."""
    start = 0.0
    for p in phases:
        if t < start + p.seconds:
            x = (t - start) / p.seconds
            wobble = p.wobble * math.sin(2 * math.pi * (t - start) / p.period_s)
            return p.start + (p.end - p.start) * x + wobble
        start += p.seconds
    return phases[-1].end


def duration_s(phases: tuple[LoadPhase, ...]) -> float:
    return sum(p.seconds for p in phases)


def best_rung(limits: list[float], load: float) -> int:
    """The rung whose depth is best at `load` (the oracle)."""
    return next((i for i, b in enumerate(limits) if load <= b), len(limits))


def band_crossings(loads: list[float], limits: list[float], h: float) -> list[int]:
    """The seconds at which the per-worker load moved from one side of a bound's band
    (b - h, b + h] to the other: the moves a ladder should follow (one switch each)."""
    side = [0] * len(limits)  # -1 below the band, +1 above, 0 not yet seen outside it
    at: list[int] = []
    for t, load in enumerate(loads):
        for j, b in enumerate(limits):
            now = 1 if load > b + h else -1 if load <= b - h else side[j]
            if side[j] != 0 and now != side[j]:
                at.append(t)
            side[j] = now
    return at


def point_crossings(loads: list[float], limits: list[float]) -> int:
    """How often the per-worker load crossed a break-even point itself (oscillations
    inside a band too)."""
    n = 0
    for a, b in itertools.pairwise(loads):
        n += abs(best_rung(limits, b) - best_rung(limits, a))
    return n


@dataclass
class DepthResult:
    scenario: str
    seed: int
    bounds: list[float]
    hysteresis: float
    requests: int = 0
    # (second, from k, to k, reason) per switch, off the router's hook
    switches: list[tuple[float, int, int, str]] = field(default_factory=list)
    # The per-worker load each second: the arm's requests in flight (every rung's pool)
    # as arrivals found them, over the workers of one rung, averaged over the second.
    load: list[float] = field(default_factory=list)
    served: list[dict[int, int]] = field(default_factory=list)  # per second: k -> requests
    resets: int = 0
    policy: str = LADDER
    e2e_per_token_ms: float = math.nan  # mean over requests of end-to-end / tokens
    p99_e2e_per_token_ms: float = math.nan
    wall_s: float = 0.0

    @property
    def real_load(self) -> list[float]:
        """The per-second load averaged over JUDGE_WINDOW_S seconds, centred."""
        half, n = JUDGE_WINDOW_S // 2, len(self.load)
        out = []
        for t in range(n):
            window = self.load[max(t - half, 0) : min(t + half + 1, n)]
            out.append(sum(window) / len(window))
        return out

    @property
    def band_crossings(self) -> list[int]:
        return band_crossings(self.real_load, self.bounds, self.hysteresis)

    @property
    def point_crossings(self) -> int:
        return point_crossings(self.real_load, self.bounds)

    @property
    def load_switches(self) -> int:
        """Switches after the ladder's first pick (its first request leaves the default
        rung for the one its load says at once)."""
        return max(len(self.switches) - 1, 0)

    @property
    def min_gap_s(self) -> float:
        times = [t for t, *_ in self.switches]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        return min(gaps) if gaps else math.inf

    def switches_between(self, start_s: float, end_s: float) -> int:
        return sum(1 for t, *_ in self.switches if start_s <= t < end_s)

    def crossings_between(self, start_s: float, end_s: float) -> tuple[int, int]:
        """(band crossings, break-even point crossings) of the load in [start_s, end_s)."""
        a, b = int(start_s), int(end_s)
        bands = sum(1 for t in self.band_crossings if a <= t < b)
        return bands, point_crossings(self.real_load[a:b], self.bounds)

    def at_best(self, *, outside_bands: bool = False) -> float:
        """The share of requests served at the depth that is best at the second's load;
        with `outside_bands`, of the seconds whose load is outside every bound's band."""
        ks = sorted({k for second in self.served for k in second}, reverse=True)
        right = total = 0
        for load, second in zip(self.real_load, self.served, strict=True):
            if outside_bands and any(abs(load - b) <= self.hysteresis for b in self.bounds):
                continue
            best = best_rung(self.bounds, load)
            total += sum(second.values())
            right += sum(n for k, n in second.items() if best < len(ks) and k == ks[best])
        return right / total if total else math.nan


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def policies(s: DepthScenario) -> list[str]:
    """What a run can route by: the ladder, each single depth alone, the oracle."""
    return [LADDER, *(f"k={k}" for k, _ in s.rungs), ORACLE]


def run_depth(s: DepthScenario, seed: int, policy: str = LADDER) -> DepthResult:
    """One seeded run of `s`. `policy`: the ladder (the DepthRouter), `k=K` (every
    request to that depth's pool: a single-depth configuration on the same number of
    serving workers), or the oracle (the depth best at the scenario's offered load at
    each arrival, known without noise or lag). The arrivals, and each depth's draws
    for them (length, speed, acceptance), are the same for every policy of a seed."""
    assert policy in policies(s), policy
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    snap = snapshot(s)
    limits = [r.max_load for r in ladder(s).rungs if r.max_load is not None]
    result = DepthResult(s.name, seed, limits, s.hysteresis, policy=policy)
    balancer = Balancer(breaker_threshold=5, breaker_cooldown_s=30.0)
    clock = _Clock()

    def on_change(change: RungChange) -> None:
        if change.reason != "start":
            assert change.from_k is not None
            result.switches.append((clock.t, change.from_k, change.to_k, change.reason))

    router = DepthRouter(balancer, clock=clock, on_change=on_change)
    tenant = snap.tenants[0]
    body = ChatCompletionBody.model_validate(
        {"model": "sim", "messages": [{"role": "user", "content": "hi"}]}
    )
    features = request_features(body, tenant=tenant.name, task=None)
    pools = {p.id: p for p in snap.pools}
    k_of = {i + 1: k for i, (k, _) in enumerate(s.rungs)}  # rung pool id -> its depth
    models = {k: (m, replace(s.traffic, k=k)) for k, m in s.rungs}
    # (completion second, sequence, lease, drafts, accepted at position 1)
    heap: list[tuple[float, int, Lease, int, int]] = []
    seq = 0
    rung_of = {f"k={k}": i for i, (k, _) in enumerate(s.rungs)}
    per_token: list[float] = []  # each request's end-to-end time per output token, s
    seconds = math.ceil(duration_s(s.phases))
    in_flight_sum = [0] * seconds
    arrivals = [0] * seconds
    result.served = [{} for _ in range(seconds)]
    slices = round(seconds / SLICE_S)
    for i in range(slices):
        t0 = i * SLICE_S
        offered = offered_load(s.phases, t0 + SLICE_S / 2)
        best = best_rung(limits, offered)
        model, traffic = models[s.rungs[best][0]]
        # Little's law on the rung best at the offered load: the arrival rate that offers
        # it per worker (the balancer's least-outstanding choice then realizes a bit less).
        rate = offered * s.workers / mean_e2e_s(model, traffic, offered)
        n = int(rng.poisson(rate * SLICE_S))
        times = np.sort(rng.uniform(t0, t0 + SLICE_S, n)).tolist()
        draws = {k: draw_requests(rng, m, tr, n) for k, (m, tr) in models.items()}
        base = {k: (d.e2e_base_ms / 1000.0).tolist() for k, d in draws.items()}
        slope = {k: (d.e2e_slope_ms / 1000.0).tolist() for k, d in draws.items()}
        drafts = {k: d.drafts.tolist() for k, d in draws.items()}
        first = {k: d.accepted_per_position[:, 0].tolist() for k, d in draws.items()}
        tokens = {k: d.tokens.tolist() for k, d in draws.items()}
        second = min(int(t0), seconds - 1)
        served = result.served[second]
        for j, t in enumerate(times):
            while heap and heap[0][0] <= t:
                clock.t, _, done, nd, na = heapq.heappop(heap)
                done.release()
                router.observe(ROLLOUT, nd, na)
            clock.t = t
            in_flight_sum[second] += len(heap)
            arrivals[second] += 1
            decision = decide(
                DecisionInput(
                    snapshot=snap,
                    snapshot_age_s=0.0,
                    tenant=tenant,
                    features=features,
                    body=body,
                    cohort_key=f"user-{seq % 1000}",
                )
            )
            if policy == LADDER:
                decision = router.route(decision, snap)
            else:
                rung = best if policy == ORACLE else rung_of[policy]
                decision = replace(decision, pool=pools[rung + 1])
            k = k_of[decision.pool.id]
            lease = balancer.acquire(pools[decision.pool.id], set())
            assert lease is not None, "every simulated worker is healthy"
            seq += 1
            e2e = base[k][j] + slope[k][j] * lease.load_at_dispatch
            heapq.heappush(heap, (t + e2e, seq, lease, drafts[k][j], first[k][j]))
            served[k] = served.get(k, 0) + 1
            per_token.append(e2e / tokens[k][j])
    result.requests = seq
    result.e2e_per_token_ms = 1000.0 * float(np.mean(per_token))
    result.p99_e2e_per_token_ms = 1000.0 * float(np.percentile(per_token, 99))
    result.load = [
        total / n / s.workers if n else 0.0
        for total, n in zip(in_flight_sum, arrivals, strict=True)
    ]
    state = router.state(ROLLOUT)
    result.resets = state.resets if state is not None else 0
    result.wall_s = time.perf_counter() - started
    return result


OSCILLATION_S = (350.0, 470.0)  # depth_by_load: the phase oscillating around a bound


def table(results: list[DepthResult]) -> list[str]:
    """One Markdown row per run."""
    a, b = OSCILLATION_S
    lines = [
        "| seed | requests | band crossings | switches after the first pick | shortest gap "
        f"(s) | oscillation {a:g}-{b:g} s: point crossings / band crossings / switches | "
        "acceptance resets | at the best depth: all / outside the bands | wall (s) |",
        "|---:|---:|---:|---:|---:|---|---:|---|---:|",
    ]
    for r in results:
        bands, points = r.crossings_between(a, b)
        lines.append(
            f"| {r.seed} | {r.requests} | {len(r.band_crossings)} | {r.load_switches} | "
            f"{r.min_gap_s:.1f} | {points} / {bands} / {r.switches_between(a, b)} | "
            f"{r.resets} | {r.at_best():.1%} / {r.at_best(outside_bands=True):.1%} | "
            f"{r.wall_s:.0f} |"
        )
    return lines


def main() -> None:
    import argparse

    from bench.decisions.scenarios import DEPTH_SCENARIOS

    parser = argparse.ArgumentParser(description="Run the depth-by-load scenario.")
    parser.add_argument("--scenario", default="depth_by_load", choices=sorted(DEPTH_SCENARIOS))
    parser.add_argument("--seeds", type=int, default=3, help="Seeds 0..N-1.")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="Also run each single depth and the oracle on seed 0's arrivals.",
    )
    args = parser.parse_args()
    s = DEPTH_SCENARIOS[args.scenario]
    if args.compare:
        print("| policy | requests | mean e2e per token (ms) | p99 (ms) | switches |")
        print("|---|---:|---:|---:|---:|")
        for policy in policies(s):
            r = run_depth(s, 0, policy)
            print(
                f"| {policy} | {r.requests} | {r.e2e_per_token_ms:.3f} | "
                f"{r.p99_e2e_per_token_ms:.3f} | {len(r.switches)} |",
                flush=True,
            )
    results = [run_depth(s, seed) for seed in range(args.seeds)]
    print(f"bounds {', '.join(f'{b:g}' for b in results[0].bounds)}; {s.description}")
    print("\n".join(table(results)))
    for r in results:
        print(
            f"seed {r.seed} switches: "
            + ", ".join(f"{t:.1f} s {a}->{b} ({why})" for t, a, b, why in r.switches)
        )


if __name__ == "__main__":
    main()
