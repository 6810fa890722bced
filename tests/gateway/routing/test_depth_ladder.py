"""Depth by load: the pure rung rule, the acceptance reset, and the router on a real
balancer's outstanding counts."""

import itertools
import math
import random
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import build_state
from gateway.decision.decide import Decision, DecisionInput, decide
from gateway.decision.depth import AcceptanceWatch, next_rung, rung_loads
from gateway.decision.features import request_features
from gateway.decision.reasons import DecisionReason as R
from gateway.proxy.schemas import ChatCompletionBody
from gateway.routing.balancer import Balancer, Lease
from gateway.routing.depth import DepthRouter
from gateway.settings import GatewaySettings
from gateway.state import GatewayState
from specwire import (
    Arm,
    DepthLadder,
    DepthRung,
    PolicySnapshot,
    PoolSnapshot,
    WorkerSpec,
)
from tests.gateway.policy import PAIR_ID, SPEC_POOL, make_snapshot

K5_POOL, K2_POOL = 4, 5


def _ladder(hysteresis: float = 0.5, dwell: float = 0.0, smoothing: float = 0.0) -> DepthLadder:
    return DepthLadder(
        rungs=[
            DepthRung(pool_id=K5_POOL, num_speculative_tokens=5, max_load=2.0),
            DepthRung(pool_id=SPEC_POOL, num_speculative_tokens=3, max_load=6.0),
            DepthRung(pool_id=K2_POOL, num_speculative_tokens=2),
        ],
        hysteresis=hysteresis,
        min_dwell_s=dwell,
        load_smoothing_s=smoothing,
    )


def _walk(ladder: DepthLadder, loads: list[float], start: int = 1, dt: float = 1.0) -> list[int]:
    """The rung after each load of the sequence (equal workers on every rung)."""
    rung, since, out = start, 1e9, []
    for load in loads:
        nxt = next_rung(ladder, [load] * 3, rung, since)
        since = dt if nxt != rung else since + dt
        rung = nxt
        out.append(rung)
    return out


def test_rung_loads_divide_the_arm_by_each_pools_workers() -> None:
    assert rung_loads(6, [2, 3, 0]) == [3.0, 2.0, math.inf]


def test_the_rung_follows_the_load_up_and_down() -> None:
    rungs = _walk(_ladder(), [0.5, 1.0, 3.0, 5.0, 7.0, 9.0, 5.0, 3.0, 1.0, 0.2])
    ks = [_ladder().rungs[i].num_speculative_tokens for i in rungs]
    assert ks == [5, 5, 3, 3, 2, 2, 3, 3, 5, 5]


def test_hysteresis_keeps_the_rung_inside_the_band() -> None:
    ladder = _ladder(hysteresis=0.5)
    # on k=5 (max 2): kept up to 2.5, left above it
    assert next_rung(ladder, [2.5] * 3, 0, 10.0) == 0
    assert next_rung(ladder, [2.6] * 3, 0, 10.0) == 1
    # on k=3: back to k=5 only at or below 1.5
    assert next_rung(ladder, [1.6] * 3, 1, 10.0) == 1
    assert next_rung(ladder, [1.5] * 3, 1, 10.0) == 0


def test_never_flaps_around_a_threshold() -> None:
    rng = random.Random(7)
    # the load wanders +-0.45 around k=5's bound of 2.0 for 10,000 steps
    loads = [2.0 + rng.uniform(-0.45, 0.45) for _ in range(10_000)]
    for start in (0, 1):
        rungs = _walk(_ladder(hysteresis=0.5), loads, start=start)
        assert len(set(rungs)) == 1, "a load inside the band never switches"
    # without hysteresis the same sequence switches thousands of times
    flat = _walk(_ladder(hysteresis=0.0), loads, start=0)
    assert sum(a != b for a, b in itertools.pairwise(flat)) > 1000


def test_switches_are_bounded_by_the_dwell() -> None:
    ladder = _ladder(hysteresis=0.0, dwell=5.0)
    loads = [1.0 if i % 2 else 3.0 for i in range(1000)]  # a square wave every step
    rungs = _walk(ladder, loads, start=0, dt=1.0)
    switches = sum(a != b for a, b in itertools.pairwise(rungs))
    assert 0 < switches <= 1000 // 5


def test_a_rung_without_workers_is_left_at_once() -> None:
    ladder = _ladder(dwell=60.0)
    # k=3's pool lost its workers 1 s after a switch: the best usable rung, dwell or not
    assert next_rung(ladder, [4.0, math.inf, 4.0], 1, 1.0) == 2
    assert next_rung(ladder, [1.0, math.inf, 1.0], 1, 1.0) == 0
    assert next_rung(ladder, [math.inf] * 3, 1, 1.0) == 1


def test_acceptance_watch_resets_on_a_sharp_change_only() -> None:
    watch = AcceptanceWatch(threshold=0.15)
    rng = random.Random(3)
    assert not any(watch.observe(0.8 + rng.uniform(-0.1, 0.1)) for _ in range(2000))
    assert watch.reference is not None and abs(watch.reference - 0.8) < 0.05
    fired = [watch.observe(0.4) for _ in range(400)]
    assert sum(fired) == 1, "one reset, then the new level is measured"
    assert fired.index(True) < 40, "the pooled rate moves within tens of requests"
    assert watch.reference == pytest.approx(0.4)


def test_acceptance_watch_pools_short_requests() -> None:
    """Short responses: ~6 draft steps each, each request's own rate Beta(6.4, 1.6)
    around 0.8 (easy and hard prompts); 100,000 of them never reset the ladder, and a
    drop to 0.5 does, once."""
    watch = AcceptanceWatch(threshold=0.15)
    rng = random.Random(11)

    def request(mean: float) -> tuple[int, int]:
        rate = rng.betavariate(8 * mean, 8 * (1 - mean))
        drafts = rng.randint(3, 9)
        return sum(rng.random() < rate for _ in range(drafts)), drafts

    assert not any(watch.observe(*request(0.8)) for _ in range(100_000))
    assert sum(watch.observe(*request(0.5)) for _ in range(1000)) == 1


# --- the router, on a real balancer ---------------------------------------------------


def _worker(pool_id: int, i: int) -> WorkerSpec:
    return WorkerSpec(
        id=f"p{pool_id}-w{i}", pool_id=pool_id, endpoint_url=f"http://w{pool_id}{i}", healthy=True
    )


def _snapshot(ladder: DepthLadder | None, *, k2_workers: int = 2) -> PolicySnapshot:
    snap = make_snapshot(spec_urls=["http://s0", "http://s1"], baseline_urls=["http://b0"])
    base_pair = next(v for v in snap.pair_versions if v.id == PAIR_ID)
    pools = list(snap.pools)
    pairs = list(snap.pair_versions)
    for pool_id, pair_id, k, n in ((K5_POOL, 20, 5, 2), (K2_POOL, 21, 2, k2_workers)):
        pairs.append(
            base_pair.model_copy(
                update={"id": pair_id, "num_speculative_tokens": k, "label": f"tiny-k{k}"}
            )
        )
        pools.append(
            PoolSnapshot(
                id=pool_id,
                name=f"tiny-k{k}",
                served_model_name=pools[0].served_model_name,
                target_ref=pools[0].target_ref,
                pair_version_id=pair_id,
                workers=[_worker(pool_id, i) for i in range(n)],
            )
        )
    rollouts = [r.model_copy(update={"depth_ladder": ladder}) for r in snap.rollouts]
    return snap.model_copy(update={"pools": pools, "pair_versions": pairs, "rollouts": rollouts})


def _decision(snap: PolicySnapshot) -> Decision:
    body = ChatCompletionBody.model_validate(
        {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
    )
    return decide(
        DecisionInput(
            snapshot=snap,
            snapshot_age_s=0.0,
            tenant=snap.tenants[0],
            features=request_features(body, tenant=snap.tenants[0].name, task=None),
            body=body,
            cohort_key="user-1",
        )
    )


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_router_moves_the_spec_arm_by_the_balancers_outstanding_counts() -> None:
    balancer = Balancer(breaker_threshold=5, breaker_cooldown_s=30.0)
    clock = _Clock()
    router = DepthRouter(balancer, clock=clock)
    snap = _snapshot(_ladder(hysteresis=0.5, dwell=1.0))
    first = _decision(snap)
    assert first.arm is Arm.SPEC and first.pool.id == SPEC_POOL
    leases: list[Lease] = []

    def send() -> Decision:
        d = router.route(_decision(snap), snap)
        lease = balancer.acquire(d.pool, set())
        assert lease is not None
        leases.append(lease)
        return d

    clock.t = 10.0
    # idle: the first request goes to k=5 (0 in flight / 2 workers)
    d = send()
    assert d.pool.id == K5_POOL and d.pair is not None and d.pair.num_speculative_tokens == 5
    assert d.header().startswith("arm=spec; pair=tiny-k5; k=5;")
    assert d.reason is R.ROLLOUT_FULL and d.fallback is not None and d.fallback.is_baseline
    for _ in range(4):
        assert send().pool.id == K5_POOL  # 1..4 in flight: load <= 2.5, dwell or not
    clock.t = 12.0
    assert send().pool.id == K5_POOL  # 5 in flight / 2 = 2.5: still in the band
    assert send().pool.id == SPEC_POOL  # 6 / 2 = 3 > 2.5: to k=3
    state = router.state(first.rollout.id if first.rollout else 0)
    assert state is not None and state.switches == 2  # 3 -> 5 at first, then 5 -> 3
    # the requests drain; back to k=5 only at or below 1.5 and after the dwell
    while len(leases) > 3:
        leases.pop().release()
    assert send().pool.id == SPEC_POOL  # within the dwell (same instant)
    clock.t = 14.0
    leases.pop().release()
    leases.pop().release()  # 2 in flight: 1.0 per worker
    assert send().pool.id == K5_POOL


def test_router_compares_the_bounds_with_the_load_smoothed_over_time() -> None:
    """A burst at one instant moves nothing; the same requests held for a few time
    constants do (6 in flight on 2 workers = 3 > 2.5 once the average passes 5)."""
    balancer = Balancer(breaker_threshold=5, breaker_cooldown_s=30.0)
    clock = _Clock()
    router = DepthRouter(balancer, clock=clock)
    snap = _snapshot(_ladder(hysteresis=0.5, dwell=0.0, smoothing=2.0))
    clock.t = 10.0
    leases: list[Lease] = []
    for _ in range(7):
        d = router.route(_decision(snap), snap)
        assert d.pool.id == K5_POOL  # the burst: the average has not moved yet
        lease = balancer.acquire(d.pool, set())
        assert lease is not None
        leases.append(lease)
    leases.pop().release()  # 6 held from here on
    ks = []
    for step in range(1, 11):
        clock.t = 10.0 + 0.5 * step
        d = router.route(_decision(snap), snap)
        assert d.pair is not None
        ks.append(d.pair.num_speculative_tokens)
    # 6 x (1 - exp(-t / 2)) > 5 from t = 3.6 s on
    assert ks == [5] * 7 + [3] * 3
    state = router.state(snap.rollouts[0].id)
    assert state is not None and state.in_flight == pytest.approx(6 * (1 - math.exp(-2.5)))


def test_router_leaves_other_decisions_alone() -> None:
    balancer = Balancer(breaker_threshold=5, breaker_cooldown_s=30.0)
    router = DepthRouter(balancer)
    no_ladder = _snapshot(None)
    d = _decision(no_ladder)
    assert router.route(d, no_ladder) is d
    snap = _snapshot(_ladder())
    baseline = _decision(snap)
    as_baseline = baseline.fall_back()
    assert as_baseline.arm is Arm.BASELINE
    assert router.route(as_baseline, snap) is as_baseline


def test_router_resets_to_the_rollouts_pool_when_acceptance_moves() -> None:
    balancer = Balancer(breaker_threshold=5, breaker_cooldown_s=30.0)
    clock = _Clock()
    router = DepthRouter(balancer, clock=clock)
    snap = _snapshot(_ladder(dwell=5.0))
    clock.t = 100.0
    d = router.route(_decision(snap), snap)
    assert d.pool.id == K5_POOL
    rollout_id = d.rollout.id if d.rollout else 0
    for _ in range(300):
        router.observe(rollout_id, drafts=10, first_position_accepted=8)
    state = router.state(rollout_id)
    assert state is not None and state.resets == 0
    for _ in range(300):
        router.observe(rollout_id, drafts=10, first_position_accepted=3)
    assert state.resets == 1
    assert router.route(_decision(snap), snap).pool.id == SPEC_POOL  # the default rung
    clock.t = 106.0  # past the dwell: the load picks again
    assert router.route(_decision(snap), snap).pool.id == K5_POOL


# --- the ladder's metrics, on the gateway's own wiring ----------------------------------


def _samples(state: GatewayState, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = state.metrics.render()[0].decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


async def test_switches_and_the_current_rung_are_exported(tmp_path: Path) -> None:
    state = build_state(GatewaySettings(snapshot_file=tmp_path / "s.json", gateway_id="t"))
    try:
        snap = _snapshot(_ladder(hysteresis=0.5, dwell=0.0))
        leases: list[Lease] = []

        def load(in_flight: int) -> int:
            """Hold `in_flight` requests, then route one more; the k it got."""
            while len(leases) > in_flight:
                leases.pop().release()
            while len(leases) < in_flight:
                d = state.depth.route(_decision(snap), snap)
                lease = state.balancer.acquire(d.pool, set())
                assert lease is not None
                leases.append(lease)
            d = state.depth.route(_decision(snap), snap)
            assert d.pair is not None
            return d.pair.num_speculative_tokens

        # two workers per rung: k=5 up to 2 (+-0.5) per worker, k=3 up to 6, then k=2
        assert [load(n) for n in (0, 6, 14, 2)] == [5, 3, 2, 5]
        segment = (("segment", "acme-chat"),)
        switches = _samples(state, "specroute_gateway_depth_switches_total")
        assert switches == {
            (("k", "5"), ("reason", "load"), *segment): 2.0,  # the first request, and back
            (("k", "3"), ("reason", "load"), *segment): 1.0,
            (("k", "2"), ("reason", "load"), *segment): 1.0,
        }
        assert _samples(state, "specroute_gateway_depth_rung_k") == {segment: 5.0}

        # load inside the bands does not switch: 3..5 in flight is 1.5..2.5 per worker
        assert {load(n) for n in (3, 4, 5, 4, 3, 5)} == {5}
        assert sum(_samples(state, "specroute_gateway_depth_switches_total").values()) == 4.0

        # a sharp drop of position-1 acceptance: back to the rollout's own pool (k=3)
        rollout_id = snap.rollouts[0].id
        for rate in [8] * 300 + [3] * 300:
            state.depth.observe(rollout_id, drafts=10, first_position_accepted=rate)
        switches = _samples(state, "specroute_gateway_depth_switches_total")
        assert switches[(("k", "3"), ("reason", "acceptance_reset"), *segment)] == 1.0
        assert _samples(state, "specroute_gateway_depth_rung_k") == {segment: 3.0}

        # the current rung's pool loses its workers: left at once, reason no_worker
        gone = _snapshot(_ladder(hysteresis=0.5, dwell=0.0))
        spec = next(p for p in gone.pools if p.id == SPEC_POOL)
        sick = [w.model_copy(update={"healthy": False}) for w in spec.workers]
        pools = [p.model_copy(update={"workers": sick}) if p is spec else p for p in gone.pools]
        gone = gone.model_copy(update={"pools": pools})
        for lease in leases:
            lease.release()
        leases.clear()
        assert state.depth.route(_decision(gone), gone).pool.id != SPEC_POOL
        switches = _samples(state, "specroute_gateway_depth_switches_total")
        assert switches[(("k", "5"), ("reason", "no_worker"), *segment)] == 1.0
        assert _samples(state, "specroute_gateway_depth_rung_k") == {segment: 5.0}
    finally:
        await state.control_client.aclose()
