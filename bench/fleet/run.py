"""The fleet fault run: traffic through haproxy while hosts and processes fail.

In order, with streamed traffic running throughout:

1. quota: a metered tenant's burst through every gateway replica; overshoot =
   tokens served / the tenant's budget (one sliding minute, shared in Redis);
2. a gateway replica SIGKILLed (only requests in flight on it may fail);
3. a control replica SIGKILLed (nothing may fail: the gateway never waits on
   control; its telemetry flush retries on the other replica);
4. an engine host partitioned (its link down) and restored: time until requests
   are no longer slowed by it, how long the requests sent during the partition
   took (p50, p99, max: one sent to the silent host waits out the gateway's
   response-header timeout, then goes to the other host), time until it serves
   again;
5. Redis paused (SIGSTOP) and resumed: the quota falls back, nothing fails;
6. a Celery worker host lost in the middle of a flip: the rollout row is held
   locked so the memory-pressure guard's flip waits inside a worker's
   transaction; that worker is SIGKILLed and its host cut off, the lock
   released; the flip must happen once (the other worker, on the redelivered
   or the next message);
7. admin flips (pause/resume): time until every gateway routes on the flip.

Then every gateway is stopped with SIGTERM (flushing its telemetry) and the
request records in PostgreSQL are matched with what the client was served.
"""

import contextlib
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
import numpy as np

from bench.fleet.stack import BASE_PORT, GATEWAY_PORTS, SPEC_PORT, WORKER_HOSTS, Fleet
from bench.fleet.traffic import Load, Outcome


@dataclass(frozen=True)
class RunOptions:
    concurrency: int = 6
    warm_s: float = 2.0
    dwell_s: float = 3.0  # how long each fault lasts (or is watched)
    partition_s: float = 5.0
    flips: int = 4
    quota_requests: int = 120
    quota_concurrency: int = 8
    restart: bool = False  # restart the killed gateway and control replicas


@dataclass
class FaultResult:
    name: str
    requests: int  # requests that overlapped the fault's window
    failed: int
    failed_in_flight: int  # failed and already started when the fault struck
    errors: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class FleetReport:
    faults: list[FaultResult]
    requests: int
    served: int
    quota_budget: int
    quota_served_tokens: int
    quota_ratio: float
    quota_refused: int
    lost_writes: int
    lost_with_killed_gateway: int
    duplicate_records: int
    duplicate_flips: int
    flip_after_release_s: float | None
    propagation_ms: list[float]
    route_around_s: float
    rejoin_s: float | None
    wall_s: float
    # Requests sent while the engine host was partitioned: how long each took, and how
    # many of them failed (a request in flight on the host when it went is not one).
    partition_waits_s: list[float] = field(default_factory=list)
    partition_sent_failed: int = 0

    def partition_wait(self, q: float) -> float:
        waits = self.partition_waits_s
        return float(np.percentile(waits, q)) if waits else float("nan")

    def propagation(self, q: float) -> float:
        return float(np.percentile(self.propagation_ms, q)) if self.propagation_ms else float("nan")

    def as_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["propagation_p50_ms"] = self.propagation(50)
        doc["propagation_p99_ms"] = self.propagation(99)
        doc["partition_wait_p50_s"] = self.partition_wait(50)
        doc["partition_wait_p99_s"] = self.partition_wait(99)
        doc["partition_wait_max_s"] = max(self.partition_waits_s, default=float("nan"))
        return doc


def _window(outcomes: list[Outcome], start: float, end: float) -> list[Outcome]:
    return [o for o in outcomes if o.start < end and o.end >= start]


def _fault(
    name: str,
    outcomes: list[Outcome],
    at: float,
    until: float,
    *,
    struck: float | None = None,
    **extra: Any,
) -> FaultResult:
    """What overlapped [at, until]; in flight = started before `struck` (the moment the
    fault had surely happened: a SIGKILLed process reaped), default `at`."""
    seen = _window(outcomes, at, until)
    failed = [o for o in seen if not o.ok]
    struck = at if struck is None else struck
    return FaultResult(
        name=name,
        requests=len(seen),
        failed=len(failed),
        failed_in_flight=sum(1 for o in failed if o.start <= struck),
        errors=dict(Counter(o.error or "?" for o in failed)),
        extra=extra,
    )


def quota_phase(fleet: Fleet, options: RunOptions) -> tuple[int, int, float]:
    burst = Load(
        fleet.gateway_url,
        fleet.world["metered_key"],
        options.quota_concurrency,
        limit=options.quota_requests,
    ).start()
    burst.join(120)
    outcomes = burst.snapshot()
    served = sum(o.tokens for o in outcomes if o.ok)
    refused = sum(1 for o in outcomes if o.status == 429)
    gateways = {o.gateway for o in outcomes if o.ok}
    assert len(gateways) >= 2, f"the quota burst reached only {gateways}"
    return served, refused, served / fleet.options.quota_budget


@dataclass
class PartitionResult:
    fault: FaultResult
    route_around_s: float  # the last request slowed by the partition started this late
    rejoin_s: float | None  # serving again this long after the link came back
    waits_s: list[float]  # each request sent during the partition: start to end
    sent_failed: int  # of those, how many failed


def partition_phase(fleet: Fleet, load: Load, options: RunOptions) -> PartitionResult:
    before = load.snapshot()
    normal = [o.end - o.start for o in before if o.ok][-200:]
    slow_s = max(3 * float(np.percentile(normal, 99)), 0.25) if normal else 0.5
    at = time.monotonic()
    fleet.net.link_down("eng2")
    # The link is surely down once the command returned: a request started before
    # may have been sent to eng2 still, and is one in flight on it.
    down = time.monotonic()
    time.sleep(options.partition_s)
    fleet.net.link_up("eng2")
    up = time.monotonic()
    served_before = _served(fleet, "eng2")
    rejoin: float | None = None
    deadline = up + 30
    while time.monotonic() < deadline:
        if _served(fleet, "eng2") > served_before:
            rejoin = time.monotonic() - up
            break
        time.sleep(0.1)
    outcomes = load.snapshot()
    during = [o for o in outcomes if down <= o.start < up]
    slowed = [o for o in during if not o.ok or o.end - o.start > slow_s]
    route_around = max((o.start - at for o in slowed), default=0.0)
    waits = [o.end - o.start for o in during]
    sent_failed = sum(1 for o in during if not o.ok)
    result = _fault(
        "engine host partitioned", outcomes, at, up, struck=down, slow_threshold_s=slow_s,
        slowed=len(slowed), route_around_s=route_around, rejoin_s=rejoin,
        sent_during=len(waits), sent_failed=sent_failed,
        wait_max_s=max(waits, default=0.0),
    )  # fmt: skip
    return PartitionResult(result, route_around, rejoin, waits, sent_failed)


def _served(fleet: Fleet, host: str) -> int:
    total = 0
    for port in (SPEC_PORT, BASE_PORT):
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            stats = httpx.get(fleet.engine_url(host, port) + "/stats", timeout=1).json()
            total += int(stats["served"])
    return total


def _wait_versions(
    fleet: Fleet, version: int, since: float, timeout_s: float = 15.0
) -> list[float]:
    """Milliseconds from `since` until each live gateway routes on `version` or newer."""
    pending = {gw for gw in GATEWAY_PORTS if fleet.children[gw].alive()}
    seen: list[float] = []
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        for gw in sorted(pending):
            v = fleet.gateway_version(gw, timeout=0.5)
            if v is not None and v >= version:
                seen.append((time.monotonic() - since) * 1000)
                pending.discard(gw)
        time.sleep(0.01)
    assert not pending, f"gateways {sorted(pending)} never routed on snapshot {version}"
    return seen


def admin_flips(fleet: Fleet, count: int) -> list[float]:
    rollout = fleet.world["rollout"]["id"]
    samples: list[float] = []
    with fleet.admin() as admin:
        for i in range(count):
            action = "pause" if i % 2 == 0 else "resume"
            response = admin.post(f"/rollouts/{rollout}/{action}", json={"reason": "fleet flip"})
            done = time.monotonic()
            assert response.status_code == 200, response.text
            version = int(fleet.control_snapshot()["version"])
            samples += _wait_versions(fleet, version, done)
            time.sleep(0.3)
    return samples


def rollout_state(fleet: Fleet) -> str:
    rows = fleet.sql("SELECT state FROM rollouts WHERE id = %s", fleet.world["rollout"]["id"])
    return str(rows[0][0])


def worker_lost_mid_flip(fleet: Fleet) -> tuple[FaultResult, int, float, list[float]]:
    """The memory guard's flip, with the worker doing it lost half-way."""
    rollout = fleet.world["rollout"]["id"]
    before = fleet.sql(
        "SELECT count(*) FROM decisions WHERE rollout_id = %s AND to_state = 'disabled'", rollout
    )[0][0]
    lock = fleet.pg_connect()
    try:
        lock.execute("SELECT id FROM rollouts WHERE id = %s FOR UPDATE", (rollout,))
        fleet.set_kv_usage("spec", 0.97)
        victim: str | None = None
        deadline = time.monotonic() + 30
        while victim is None and time.monotonic() < deadline:
            waiting = fleet.sql(
                "SELECT application_name FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            names = {str(r[0]).removeprefix("fleet-") for r in waiting}
            victim = next((w for w in WORKER_HOSTS if w in names), None)
            time.sleep(0.05)
        assert victim is not None, "no worker reached the flip:\n" + fleet.log_tails(
            [*WORKER_HOSTS, "beat"]
        )
        fleet.kill(victim)
        fleet.net.link_down(WORKER_HOSTS[victim])
    finally:
        lock.rollback()
        lock.close()
    released = time.monotonic()
    deadline = released + 30
    while rollout_state(fleet) != "disabled" and time.monotonic() < deadline:
        time.sleep(0.05)
    flipped = time.monotonic()
    assert rollout_state(fleet) == "disabled", "the surviving worker never flipped"
    version = int(fleet.control_snapshot()["version"])
    propagation = _wait_versions(fleet, version, flipped)
    time.sleep(2.0)  # any duplicate would land by now (guards run every second)
    after = fleet.sql(
        "SELECT count(*) FROM decisions WHERE rollout_id = %s AND to_state = 'disabled'", rollout
    )[0][0]
    # Recover: memory back to normal, the host back; probation re-enables the rollout.
    fleet.set_kv_usage("spec", 0.1)
    fleet.net.link_up(WORKER_HOSTS[victim])
    result = FaultResult(
        name="celery worker host lost mid-flip",
        requests=0,
        failed=0,
        failed_in_flight=0,
        errors={},
        extra={"victim": victim, "disable_decisions": int(after) - int(before)},
    )
    return result, int(after) - int(before) - 1, flipped - released, propagation


def wait_enabled(fleet: Fleet, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    state = rollout_state(fleet)
    while state == "disabled" and time.monotonic() < deadline:
        time.sleep(0.2)
        state = rollout_state(fleet)
    return state


def match_records(
    fleet: Fleet, outcomes: list[Outcome], killed_gateway: str, killed_at: float
) -> tuple[int, int, int]:
    """(lost writes, records lost with the SIGKILLed gateway, duplicate records)."""
    ids: Counter[str] = Counter()
    deadline = time.monotonic() + 20
    last = -1
    while time.monotonic() < deadline:
        rows = fleet.sql("SELECT request_id FROM request_records")
        if len(rows) == last:
            break
        last = len(rows)
        time.sleep(1.5)
    ids = Counter(str(r[0]) for r in rows)
    lost = lost_killed = 0
    for o in outcomes:
        if not o.ok or o.request_id in ids:
            continue
        if o.gateway == killed_gateway and o.end <= killed_at + 0.5:
            lost_killed += 1  # its window was still in memory when the process died
        else:
            lost += 1
    duplicates = sum(1 for n in ids.values() if n > 1)
    return lost, lost_killed, duplicates


def run(fleet: Fleet, options: RunOptions) -> FleetReport:
    started = time.monotonic()
    faults: list[FaultResult] = []
    load = Load(fleet.gateway_url, fleet.world["key"], options.concurrency).start()
    try:
        time.sleep(options.warm_s)
        quota_tokens, quota_refused, quota_ratio = quota_phase(fleet, options)

        at = time.monotonic()
        fleet.kill("gw2")
        dead = time.monotonic()
        time.sleep(options.dwell_s)
        faults.append(
            _fault("gateway replica SIGKILLed", load.snapshot(), at, time.monotonic(), struck=dead)
        )
        gw_killed_at = at
        if options.restart:
            fleet.restart("gw2")

        at = time.monotonic()
        fleet.kill("c1")
        time.sleep(options.dwell_s)
        faults.append(_fault("control replica SIGKILLed", load.snapshot(), at, time.monotonic()))
        if options.restart:
            fleet.restart("c1")

        partition = partition_phase(fleet, load, options)
        faults.append(partition.fault)

        at = time.monotonic()
        fleet.pause("redis")
        time.sleep(options.dwell_s)
        fleet.resume("redis")
        outcomes = load.snapshot()
        paused = [o.end - o.start for o in _window(outcomes, at, time.monotonic()) if o.ok]
        faults.append(
            _fault(
                "redis paused",
                outcomes,
                at,
                time.monotonic(),
                e2e_p99_ms=float(np.percentile(paused, 99)) * 1000 if paused else None,
            )
        )

        mid_flip, duplicate_flips, flip_after, propagation = worker_lost_mid_flip(fleet)
        faults.append(mid_flip)
        mid_flip.extra["state_after_probation"] = wait_enabled(fleet)
        propagation += admin_flips(fleet, options.flips)
    finally:
        load.stop()
    outcomes = load.snapshot()
    fleet.stop_gateways()
    lost, lost_killed, duplicates = match_records(fleet, outcomes, "gw2", gw_killed_at)
    return FleetReport(
        faults=faults,
        requests=len(outcomes),
        served=sum(1 for o in outcomes if o.ok),
        quota_budget=fleet.options.quota_budget,
        quota_served_tokens=quota_tokens,
        quota_ratio=quota_ratio,
        quota_refused=quota_refused,
        lost_writes=lost,
        lost_with_killed_gateway=lost_killed,
        duplicate_records=duplicates,
        duplicate_flips=duplicate_flips,
        flip_after_release_s=flip_after,
        propagation_ms=propagation,
        route_around_s=partition.route_around_s,
        rejoin_s=partition.rejoin_s,
        wall_s=time.monotonic() - started,
        partition_waits_s=partition.waits_s,
        partition_sent_failed=partition.sent_failed,
    )
